package reconciler

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cuengine/engine/contract"
)

var (
	configMapGVK  = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	deploymentGVK = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	serviceGVK    = schema.GroupVersionKind{Version: "v1", Kind: "Service"}
	ingressGVK    = schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}
)

func isTerminal(err error) bool { return errors.Is(err, reconcile.TerminalError(nil)) }

// TestChildConflict: a child whose name is held by an object this parent
// does not provably own is left untouched and reported; the other children
// are applied; the reconcile is terminal.
func TestChildConflict(t *testing.T) {
	for _, tc := range []struct {
		name  string
		meta  metav1.ObjectMeta
		owner string
		hint  string
	}{
		{
			name:  "not created by the engine",
			meta:  metav1.ObjectMeta{Namespace: unitNamespace, Name: "site-content"},
			owner: "not created by the engine for it",
			hint:  ". To hand it over to this Website, its owner runs: kubectl annotate configmap/site-content -n ns engine.cuengine.dev/adopt-by=Website.test.cuengine.dev/ns/site; then engine reconcile website.test.cuengine.dev/site -n ns adopts it",
		},
		{
			name: "controlled by another parent",
			meta: metav1.ObjectMeta{Namespace: unitNamespace, Name: "site-content",
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "webapp.my.domain/v1", Kind: "MyKind", Name: "other", UID: "uid-other", Controller: new(true)}}},
			owner: "controlled by MyKind other",
			hint:  ": an object another controller controls is never adopted",
		},
		{
			name: "labelled as this parent's child, without proof",
			meta: metav1.ObjectMeta{Namespace: unitNamespace, Name: "site-content",
				Labels: map[string]string{contract.LabelManagedBy: contract.ManagedByValue, contract.LabelParentUID: "uid-site", contract.LabelChild: "config"}},
			owner: "not created by the engine for it",
			hint:  ". To hand it over to this Website, its owner runs: kubectl annotate configmap/site-content -n ns engine.cuengine.dev/adopt-by=Website.test.cuengine.dev/ns/site; then engine reconcile website.test.cuengine.dev/site -n ns adopts it",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			site := siteParent(t, map[string]any{"image": "nginx"})
			e := newUnitEnv(t, unitWebsite, site, &corev1.ConfigMap{ObjectMeta: tc.meta, Data: map[string]string{"index.html": "theirs"}})
			before := e.get(configMapGVK, unitNamespace, "site-content")

			_, err := e.reconcile(site)
			require.Error(t, err)
			assert.True(t, isTerminal(err), "a conflict is terminal: %v", err)

			msg := "ConfigMap ns/site-content exists and is not controlled by this Website (" + tc.owner + "); it is left untouched" + tc.hint
			assert.Equal(t, cond{metav1.ConditionFalse, contract.ReasonChildConflict, msg}, condOf(e.condition(site, contract.ConditionSynced)))
			assert.Equal(t, cond{metav1.ConditionFalse, contract.ReasonNotSynced, "not synced: ChildConflict"}, condOf(e.condition(site, contract.ConditionReady)))
			// The ConfigMap's one request is the create-only apply, which
			// the apiserver refuses because the name is taken; then one
			// read, the ownership check.
			assert.Equal(t, map[string]int{"apply ConfigMap": 1, "apply Deployment": 1, "apply Service": 1, "status Website": 1}, e.takeWrites(),
				"the other children applied, the foreign object not")
			assert.Equal(t, map[string]int{"get ConfigMap": 1}, childReads(e.takeReads()), "the taken name alone costs a read")
			assert.Equal(t, before, e.get(configMapGVK, unitNamespace, "site-content"), "the foreign object is untouched")
			assert.ElementsMatch(t, []unitEvent{
				{corev1.EventTypeNormal, "Created", "Created Deployment site"},
				{corev1.EventTypeNormal, "Created", "Created Service site"},
				{corev1.EventTypeWarning, contract.ReasonChildConflict, msg},
			}, e.events.take())
		})
	}
}

// childReads keeps the reads of child kinds: those of the parent kinds
// are the reconciler's, not the ownership check's.
func childReads(reads map[string]int) map[string]int {
	out := map[string]int{}
	for k, n := range reads {
		if k != "get Website" && k != "get MyKind" {
			out[k] = n
		}
	}
	return out
}

// TestNewChildCostsNoRead: creating a child, for a new parent or in
// place of a deleted one, is one request per child: the create-only apply,
// with no read before it; it creates the child as the apply would.
func TestNewChildCostsNoRead(t *testing.T) {
	site := siteParent(t, map[string]any{"image": "nginx"})
	e := newUnitEnv(t, unitWebsite, site)

	e.reconcileClean(site)
	assert.Equal(t, map[string]int{"apply ConfigMap": 1, "apply Deployment": 1, "apply Service": 1}, e.takeWrites(),
		"one request per child (the status is left to the reconcile their events bring)")
	assert.Empty(t, childReads(e.takeReads()), "no child is read before it is created")
	cm := e.get(configMapGVK, unitNamespace, "site-content")
	require.NotNil(t, cm)
	assert.Equal(t, map[string]any{"index.html": "hello"}, cm.Object["data"])
	assert.NotEmpty(t, cm.GetAnnotations()[contract.AnnotationAppliedHash])
	assert.NotEqual(t, createOnlyVersion, cm.GetResourceVersion(), "the precondition is not stored")

	require.NoError(t, e.store.Delete(e.ctx, cm))
	e.reconcileClean(site)
	assert.Equal(t, 1, e.takeWrites()["apply ConfigMap"], "recreated")
	assert.Empty(t, childReads(e.takeReads()), "no read to recreate a deleted child")
	assert.NotNil(t, e.get(configMapGVK, unitNamespace, "site-content"))
}

// TestChildOfThisParentIsAdopted: an object the parent controls but the
// child cache does not list as that child (its labels were removed, or name
// another local name) is the parent's own: it is applied, not reported, and
// it exists after the reconcile.
func TestChildOfThisParentIsAdopted(t *testing.T) {
	ref := []metav1.OwnerReference{{APIVersion: "test.cuengine.dev/v1", Kind: "Website", Name: "site", UID: "uid-site", Controller: new(true)}}
	for _, tc := range []struct {
		name   string
		labels map[string]string
	}{
		{"without labels", nil},
		{"labelled under another local name", map[string]string{contract.LabelManagedBy: contract.ManagedByValue, contract.LabelParentUID: "uid-site", contract.LabelChild: "content"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			site := siteParent(t, map[string]any{"image": "nginx"})
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: unitNamespace, Name: "site-content", Labels: tc.labels, OwnerReferences: ref}}
			e := newUnitEnv(t, unitWebsite, site, cm)

			res := e.reconcileClean(site)
			assert.Equal(t, ctrl.Result{RequeueAfter: deferredStatusDelay}, res)
			writes := e.takeWrites()
			assert.Equal(t, 2, writes["apply ConfigMap"], "the create-only apply, refused for the taken name, then the apply")
			assert.Equal(t, map[string]int{"get ConfigMap": 1}, childReads(e.takeReads()), "the ownership check")
			assert.Zero(t, writes["delete ConfigMap"], "the object applied as the child is not pruned as the old one")
			live := e.get(configMapGVK, unitNamespace, "site-content")
			require.NotNil(t, live, "the child must exist after the reconcile that applied it")
			assert.Equal(t, "config", live.GetLabels()[contract.LabelChild])
			assert.Equal(t, map[string]any{"index.html": "hello"}, live.Object["data"])
		})
	}
}

// TestChildRefused: children outside the parent's namespace, or
// cluster-scoped, without a policy allowing them, are refused; the allowed
// child is applied; the reconcile is terminal.
func TestChildRefused(t *testing.T) {
	leaky := unitParent(unitLeaky, "leaky", map[string]any{})
	e := newUnitEnv(t, unitLeaky, leaky)

	_, err := e.reconcile(leaky)
	assert.True(t, isTerminal(err), "a refused child is terminal: %v", err)

	clusterMsg := `child cluster: ClusterRole "leaky" is cluster-scoped; set policy: clusterScoped: true in the template to allow it`
	elsewhereMsg := `child elsewhere: ConfigMap "elsewhere" is in namespace "default", not the parent's "ns"; set policy: crossNamespace: true in the template to allow it`
	assert.Equal(t, cond{metav1.ConditionFalse, contract.ReasonChildRefused, clusterMsg + "; " + elsewhereMsg}, condOf(e.condition(leaky, contract.ConditionSynced)))
	assert.Equal(t, map[string]int{"apply ConfigMap": 1, "status Leaky": 1}, e.takeWrites())
	assert.NotNil(t, e.get(configMapGVK, unitNamespace, "local"), "the allowed child is applied")
	assert.Nil(t, e.get(configMapGVK, "default", "elsewhere"))
	assert.Nil(t, e.get(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, "", "leaky"))
	assert.ElementsMatch(t, []unitEvent{
		{corev1.EventTypeNormal, "Created", "Created ConfigMap local"},
		{corev1.EventTypeWarning, contract.ReasonChildRefused, clusterMsg},
		{corev1.EventTypeWarning, contract.ReasonChildRefused, elsewhereMsg},
	}, e.events.take())
}

// TestTemplateError: a parent that violates the schema is InvalidSpec, a
// template that fails for a valid parent is TemplateError; either way no
// child is written and the reconcile is terminal.
func TestTemplateError(t *testing.T) {
	for _, tc := range []struct {
		name          string
		parent        *unstructured.Unstructured
		reason, msg   string
		child         schema.GroupVersionKind
		childName     string
		statusWritten string
	}{
		{
			name:   "invalid spec",
			parent: unitParent(unitMyKind, "mk", map[string]any{"deploymentName": "web", "replicas": int64(-1)}),
			reason: contract.ReasonInvalidSpec,
			msg:    "mykind.cue:14:26: parent.spec.replicas: invalid value -1 (out of bound >=0)",
			child:  deploymentGVK, childName: "web", statusWritten: "status MyKind",
		},
		{
			name:   "template error outside parent",
			parent: unitParent(unitBroken, "broken", map[string]any{"name": "Bad1"}),
			reason: contract.ReasonTemplateError,
			msg:    `broken.cue:16:33: children.config.data.name: invalid value "Bad1" (out of bound =~"^[a-z]+$") (see broken.cue:16:14)`,
			child:  configMapGVK, childName: "broken", statusWritten: "status Broken",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newUnitEnv(t, tc.parent.GroupVersionKind(), tc.parent)
			exceeded := e.limitExceeded()

			_, err := e.reconcile(tc.parent)
			assert.True(t, isTerminal(err), "a template error is terminal: %v", err)
			assert.NoError(t, e.rememberedOverLimit(tc.parent), "a template error is not a limit exceeded")
			assert.Equal(t, exceeded, e.limitExceeded(), "nor counted as one")
			assert.Equal(t, cond{metav1.ConditionFalse, tc.reason, tc.msg}, condOf(e.condition(tc.parent, contract.ConditionSynced)))
			assert.Equal(t, cond{metav1.ConditionFalse, contract.ReasonNotSynced, "the template could not be evaluated for this object"},
				condOf(e.condition(tc.parent, contract.ConditionReady)))
			assert.Equal(t, map[string]int{tc.statusWritten: 1}, e.takeWrites(), "the status only")
			assert.Nil(t, e.get(tc.child, unitNamespace, tc.childName))
			assert.Equal(t, []unitEvent{{corev1.EventTypeWarning, tc.reason, tc.msg}}, e.events.take())

			_, err = e.reconcile(tc.parent)
			assert.True(t, isTerminal(err))
			assert.Empty(t, e.takeWrites(), "the same failure again writes nothing")
			assert.Empty(t, e.events.take(), "and records no second event")
		})
	}
}

// TestApplyFailure: a child the apiserver refuses is a problem of its own
// (ApplyFailed, terminal) and the others are applied; an apiserver that
// fails aborts the reconcile with a transient error and no status write.
func TestApplyFailure(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		site := siteParent(t, map[string]any{"image": "nginx"})
		e := newUnitEnv(t, unitWebsite, site)
		e.failWrites("apply Service", apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "site", field.ErrorList{field.Invalid(field.NewPath("spec", "ports"), 80, "bad port")}))

		_, err := e.reconcile(site)
		assert.True(t, isTerminal(err), "a refused child is terminal: %v", err)
		msg := `applying Service site: Service "site" is invalid: spec.ports: Invalid value: 80: bad port`
		assert.Equal(t, cond{metav1.ConditionFalse, contract.ReasonApplyFailed, msg}, condOf(e.condition(site, contract.ConditionSynced)))
		assert.Equal(t, map[string]int{"apply ConfigMap": 1, "apply Deployment": 1, "apply Service": 1, "status Website": 1}, e.takeWrites())
		assert.NotNil(t, e.get(deploymentGVK, unitNamespace, "site"), "the other children are applied")
	})
	t.Run("unavailable", func(t *testing.T) {
		site := siteParent(t, map[string]any{"image": "nginx"})
		e := newUnitEnv(t, unitWebsite, site)
		e.failWrites("apply ConfigMap", apierrors.NewServiceUnavailable("etcd is down"))

		res, err := e.reconcile(site)
		require.Error(t, err)
		assert.False(t, isTerminal(err), "an unavailable apiserver is transient: %v", err)
		assert.Equal(t, ctrl.Result{}, res)
		assert.Equal(t, "applying ConfigMap site-content: etcd is down", err.Error())
		assert.Equal(t, map[string]int{"apply ConfigMap": 1}, e.takeWrites(), "no status write for an error it did not record")
		assert.Nil(t, e.condition(site, contract.ConditionSynced))
	})
}

// TestPrune: the parent's children the template no longer produces are
// deleted; objects that only carry its labels are not.
func TestPrune(t *testing.T) {
	ref := []metav1.OwnerReference{{APIVersion: "test.cuengine.dev/v1", Kind: "Website", Name: "site", UID: "uid-site", Controller: new(true)}}
	labels := map[string]string{contract.LabelManagedBy: contract.ManagedByValue, contract.LabelParentUID: "uid-site", contract.LabelChild: "stray"}

	t.Run("a child the template no longer produces", func(t *testing.T) {
		site := siteParent(t, map[string]any{"image": "nginx", "expose": true})
		e := newUnitEnv(t, unitWebsite, site)
		e.reconcileClean(site)
		require.NotNil(t, e.get(ingressGVK, unitNamespace, "site"))
		e.takeWrites()
		e.events.take()

		cur := e.reread(site)
		cur.Object["spec"] = map[string]any{"image": "nginx", "expose": false}
		cur.SetGeneration(2)
		e.update(cur)
		res := e.reconcileClean(site)
		assert.Equal(t, ctrl.Result{}, res)
		assert.Equal(t, map[string]int{"delete Ingress": 1, "status Website": 1}, e.takeWrites(),
			"one delete, no apply; a delete does not hold the status back")
		assert.Nil(t, e.get(ingressGVK, unitNamespace, "site"))
		assert.NotNil(t, e.get(serviceGVK, unitNamespace, "site"))
		assert.Equal(t, []unitEvent{{corev1.EventTypeNormal, "Deleted", "Deleted Ingress site"}}, e.events.take())
	})
	t.Run("a labelled object the parent controls", func(t *testing.T) {
		site := siteParent(t, map[string]any{"image": "nginx"})
		stray := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: unitNamespace, Name: "stray", Labels: labels, OwnerReferences: ref}}
		e := newUnitEnv(t, unitWebsite, site, stray)

		e.reconcileClean(site)
		assert.Equal(t, map[string]int{"apply ConfigMap": 1, "apply Deployment": 1, "apply Service": 1, "delete ConfigMap": 1}, e.takeWrites())
		assert.Nil(t, e.get(configMapGVK, unitNamespace, "stray"))
	})
	t.Run("a labelled object without proof is never deleted", func(t *testing.T) {
		site := siteParent(t, map[string]any{"image": "nginx"})
		stray := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: unitNamespace, Name: "stray", Labels: labels}}
		e := newUnitEnv(t, unitWebsite, site, stray)

		e.reconcileClean(site)
		assert.Equal(t, map[string]int{"apply ConfigMap": 1, "apply Deployment": 1, "apply Service": 1}, e.takeWrites())
		assert.NotNil(t, e.get(configMapGVK, unitNamespace, "stray"))
	})
}

// TestStatusDeferredAfterChildWrites: a reconcile that applied children
// leaves the status to the next one, which sees their result.
func TestStatusDeferredAfterChildWrites(t *testing.T) {
	mk := unitParent(unitMyKind, "mk", map[string]any{"deploymentName": "web"})
	e := newUnitEnv(t, unitMyKind, mk)

	res := e.reconcileClean(mk)
	assert.Equal(t, ctrl.Result{RequeueAfter: deferredStatusDelay}, res)
	assert.Equal(t, map[string]int{"apply Deployment": 1}, e.takeWrites(), "the child, not the status")
	assert.Nil(t, e.reread(mk).Object["status"])

	res = e.reconcileClean(mk)
	assert.Equal(t, ctrl.Result{}, res)
	assert.Equal(t, map[string]int{"status MyKind": 1}, e.takeWrites())
	assert.Equal(t, cond{metav1.ConditionTrue, contract.ReasonSynced, "children and resources are applied"}, condOf(e.condition(mk, contract.ConditionSynced)))
	assert.Equal(t, cond{metav1.ConditionFalse, contract.ReasonWaiting, "waiting for Deployment web"}, condOf(e.condition(mk, contract.ConditionReady)))
}

// siteParent is a Website as the record step leaves it: its Deployment
// depends on its ConfigMap (the template reads children.config), so it
// carries the finalizer that orders their deletion.
func siteParent(t *testing.T, spec map[string]any) *unstructured.Unstructured {
	t.Helper()
	return withRecords(t, unitParent(unitWebsite, "site", spec))
}
