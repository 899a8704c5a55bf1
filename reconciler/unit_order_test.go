package reconciler

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates"
)

var (
	unitOrdered       = schema.GroupVersionKind{Group: "unit.cuengine.dev", Version: "v1", Kind: "Ordered"}
	secretGVK         = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	serviceAccountGVK = schema.GroupVersionKind{Version: "v1", Kind: "ServiceAccount"}
)

// newOrdered creates an Ordered parent and reconciles it until its bucket
// (o-0) and its three children exist.
func newOrdered(t *testing.T) (*unitEnv, *unstructured.Unstructured) {
	t.Helper()
	o := unitParent(unitOrdered, "o", map[string]any{})
	e := newUnitEnv(t, unitOrdered, o)
	e.reconcileClean(o) // the record
	e.reconcileClean(o) // the bucket, then the children that read it
	require.Equal(t, []string{"apply o-0"}, e.provider.takeCalls())
	app := e.get(secretGVK, unitNamespace, "o-app")
	require.NotNil(t, app)
	assert.Equal(t, "bucket,config", app.GetAnnotations()[contract.AnnotationDependsOn], "what the child depends on travels with it")
	assert.Equal(t, "bucket", e.get(configMapGVK, unitNamespace, "o-config").GetAnnotations()[contract.AnnotationDependsOn])
	assert.NotContains(t, e.get(serviceAccountGVK, unitNamespace, "o-lone").GetAnnotations(), contract.AnnotationDependsOn)
	e.takeWrites()
	e.takeDeletes()
	e.events.take()
	return e, o
}

// exists reports which of the Ordered parent's children are still there.
func (e *unitEnv) orderedChildren() []string {
	var out []string
	for _, c := range []struct {
		gvk  schema.GroupVersionKind
		name string
	}{{configMapGVK, "o-config"}, {secretGVK, "o-app"}, {serviceAccountGVK, "o-lone"}} {
		if e.get(c.gvk, unitNamespace, c.name) != nil {
			out = append(out, c.name)
		}
	}
	return out
}

// TestDeletionOrder: a parent's deletion goes dependents first, one
// step per reconcile (each brought by the event of the step before): the
// Secret that reads the ConfigMap, then the ConfigMap that reads the
// bucket, with foreground propagation, then the bucket, then the
// finalizer. The child nothing depends on is left to the garbage
// collector. Ready names what waits for what.
func TestDeletionOrder(t *testing.T) {
	e, o := newOrdered(t)
	require.NoError(t, e.store.Delete(e.ctx, e.reread(o)))

	res := e.reconcileClean(o)
	assert.Equal(t, ctrl.Result{RequeueAfter: deletionRecheck}, res)
	assert.Equal(t, []string{"Secret o-app Foreground"}, e.takeDeletes())
	assert.Empty(t, e.provider.takeCalls(), "the bucket waits")
	assert.Equal(t, []string{"o-config", "o-lone"}, e.orderedChildren())
	assert.Equal(t, cond{metav1.ConditionFalse, contract.ReasonDeleting, "deleting: ConfigMap o-config waits for Secret o-app; resource bucket waits for ConfigMap o-config, Secret o-app"},
		condOf(e.condition(o, contract.ConditionReady)))
	assert.Equal(t, metav1.ConditionTrue, e.condition(o, contract.ConditionSynced).Status)
	assert.Equal(t, []unitEvent{{corev1.EventTypeNormal, "Deleted", "Deleted Secret ns/o-app"}}, e.events.take())

	e.reconcileClean(o)
	assert.Equal(t, []string{"ConfigMap o-config Foreground"}, e.takeDeletes())
	assert.Empty(t, e.provider.takeCalls(), "the bucket still waits")
	assert.Equal(t, cond{metav1.ConditionFalse, contract.ReasonDeleting, "deleting: resource bucket waits for ConfigMap o-config"},
		condOf(e.condition(o, contract.ConditionReady)))

	res = e.reconcileClean(o)
	assert.Equal(t, ctrl.Result{}, res)
	assert.Equal(t, []string{"delete o-0"}, e.provider.takeCalls())
	assert.Empty(t, e.takeDeletes(), "the ServiceAccount is the garbage collector's")
	assert.Nil(t, e.get(unitOrdered, unitNamespace, "o"), "then the finalizer goes")
	assert.Equal(t, []string{"o-lone"}, e.orderedChildren())
}

// TestDeletionStuckDependent: a dependent held by someone else's
// finalizer keeps what it depends on, and the parent says so on Synced
// (DeletionBlocked, a Warning event) and Ready, and looks again later;
// once the finalizer is removed the deletion completes.
func TestDeletionStuckDependent(t *testing.T) {
	e, o := newOrdered(t)
	app := e.get(secretGVK, unitNamespace, "o-app")
	app.SetFinalizers([]string{"example.com/hold"})
	e.update(app)
	require.NoError(t, e.store.Delete(e.ctx, e.reread(o)))

	e.reconcileClean(o)
	assert.Equal(t, []string{"Secret o-app Foreground"}, e.takeDeletes())
	require.NotNil(t, e.get(secretGVK, unitNamespace, "o-app").GetDeletionTimestamp(), "held by its finalizer")
	e.events.take()
	e.takeWrites()

	for range 2 { // the same on every look: one status write, one event
		res, err := e.reconcile(o)
		require.NoError(t, err, "a wait, not a failure")
		assert.Equal(t, ctrl.Result{RequeueAfter: deletionRecheck}, res)
		assert.Empty(t, e.takeDeletes())
		assert.Empty(t, e.provider.takeCalls())
	}
	msg := "Secret o-app is held by finalizer example.com/hold; ConfigMap o-config, resource bucket waits for it"
	assert.Equal(t, cond{metav1.ConditionFalse, contract.ReasonDeletionBlocked, msg}, condOf(e.condition(o, contract.ConditionSynced)))
	assert.Equal(t, cond{metav1.ConditionFalse, contract.ReasonDeleting,
		"deleting: ConfigMap o-config waits for Secret o-app (being deleted; finalizers: example.com/hold); resource bucket waits for ConfigMap o-config, Secret o-app (being deleted; finalizers: example.com/hold)"},
		condOf(e.condition(o, contract.ConditionReady)))
	assert.Equal(t, []unitEvent{{corev1.EventTypeWarning, contract.ReasonDeletionBlocked, msg}}, e.events.take())
	assert.Equal(t, map[string]int{"status Ordered": 1}, e.takeWrites())

	app = e.get(secretGVK, unitNamespace, "o-app")
	app.SetFinalizers(nil)
	e.update(app)
	require.Nil(t, e.get(secretGVK, unitNamespace, "o-app"))
	e.reconcileClean(o)
	assert.Equal(t, []string{"ConfigMap o-config Foreground"}, e.takeDeletes())
	e.reconcileClean(o)
	assert.Equal(t, []string{"delete o-0"}, e.provider.takeCalls())
	assert.Nil(t, e.get(unitOrdered, unitNamespace, "o"))
}

// TestDeletionOrderOrphan: a bucket kept by the parent's annotation
// still goes (from the parent's records) without waiting; the children are
// deleted in their order.
func TestDeletionOrderOrphan(t *testing.T) {
	e, o := newOrdered(t)
	e.annotate(e.reread(o), contract.AnnotationDeletionPolicy, templates.DeletionPolicyOrphan)
	require.NoError(t, e.store.Delete(e.ctx, e.reread(o)))

	e.reconcileClean(o)
	assert.Equal(t, []string{"Secret o-app Foreground"}, e.takeDeletes())
	e.reconcileClean(o)
	assert.Equal(t, []string{"ConfigMap o-config Foreground"}, e.takeDeletes())
	e.reconcileClean(o)
	assert.Empty(t, e.provider.takeCalls(), "orphaned: never deleted")
	assert.Nil(t, e.get(unitOrdered, unitNamespace, "o"))
}

// TestDeletionOrphanCascade: a parent deleted with --cascade=orphan
// keeps its owned children, so its bucket waits for none of them.
func TestDeletionOrphanCascade(t *testing.T) {
	e, o := newOrdered(t)
	cur := e.reread(o)
	cur.SetFinalizers([]string{contract.Finalizer, metav1.FinalizerOrphanDependents})
	e.update(cur)
	require.NoError(t, e.store.Delete(e.ctx, e.reread(o)))

	e.reconcileClean(o)
	assert.Equal(t, []string{"delete o-0"}, e.provider.takeCalls())
	assert.Empty(t, e.takeDeletes(), "the children are kept")
	assert.Equal(t, []string{"o-config", "o-app", "o-lone"}, e.orderedChildren())
	assert.Equal(t, []string{metav1.FinalizerOrphanDependents}, e.reread(o).GetFinalizers(), "the garbage collector's is left to it")
}

// TestPruneOrder: a spec change that drops the bucket and the two
// children reading it deletes them in the same order as a deletion, and
// Ready says what waits; the record goes with the bucket.
func TestPruneOrder(t *testing.T) {
	e, o := newOrdered(t)
	cur := e.reread(o)
	cur.Object["spec"] = map[string]any{"keep": false}
	cur.SetGeneration(2)
	e.update(cur)

	e.reconcileClean(o)
	assert.Equal(t, []string{"Secret o-app Foreground"}, e.takeDeletes())
	assert.Empty(t, e.provider.takeCalls(), "not deleted: it waits")
	assert.NotNil(t, recordOf(t, e.reread(o), "bucket"))
	assert.Equal(t, cond{metav1.ConditionFalse, contract.ReasonWaiting, "resource bucket waits for ConfigMap o-config, Secret o-app; ConfigMap o-config waits for Secret o-app"},
		condOf(e.condition(o, contract.ConditionReady)))

	e.reconcileClean(o)
	assert.Equal(t, []string{"ConfigMap o-config Foreground"}, e.takeDeletes())
	assert.Empty(t, e.provider.takeCalls())

	e.reconcileClean(o)
	assert.Equal(t, []string{"delete o-0"}, e.provider.takeCalls())
	assert.Nil(t, recordOf(t, e.reread(o), "bucket"), "the record goes with it")
	assert.Equal(t, []string{"o-lone"}, e.orderedChildren())
	e.reconcileClean(o)
	assert.Equal(t, cond{metav1.ConditionTrue, contract.ReasonReady, "all children are ready"}, condOf(e.condition(o, contract.ConditionReady)))
}

// TestOrderedChildrenGetTheFinalizer: a template whose children depend
// on each other (Website's Deployment reads children.config) keeps the
// finalizer on its parents, so their deletion can be ordered.
func TestOrderedChildrenGetTheFinalizer(t *testing.T) {
	site := unitParent(unitWebsite, "site", map[string]any{"image": "nginx"})
	e := newUnitEnv(t, unitWebsite, site)
	e.reconcileClean(site)
	assert.Equal(t, map[string]int{"patch Website": 1}, e.takeWrites())
	assert.Equal(t, []string{contract.Finalizer}, e.reread(site).GetFinalizers())
	e.reconcileClean(site)
	assert.Equal(t, "config", e.get(deploymentGVK, unitNamespace, "site").GetAnnotations()[contract.AnnotationDependsOn])

	require.NoError(t, e.store.Delete(e.ctx, e.reread(site)))
	e.reconcileClean(site)
	assert.Equal(t, []string{"Deployment site Foreground"}, e.takeDeletes(), "the ConfigMap waits; the Service is the garbage collector's")
	e.reconcileClean(site)
	assert.Empty(t, e.takeDeletes(), "the ConfigMap, which nothing depends on any more, too")
	assert.Nil(t, e.get(unitWebsite, unitNamespace, "site"))
}

// TestReadyNamesHeldBackChildren: before the bucket exists, Ready says
// which children wait for it.
func TestReadyNamesHeldBackChildren(t *testing.T) {
	all, err := unitTemplates()
	require.NoError(t, err)
	tpl := all[unitOrdered]
	res, err := tpl.Evaluate(templates.Input{Parent: unitParent(unitOrdered, "o", map[string]any{})})
	require.NoError(t, err)
	eval := &evaluation{result: res, observed: map[string]any{}, graph: tpl.Graph()}
	assert.Equal(t, []string{"child app waits for bucket", "child config waits for bucket"}, heldBack(eval))

	eval.observed = map[string]any{"bucket": map[string]any{"name": "o-0"}}
	assert.Empty(t, heldBack(eval))

	res, err = tpl.Evaluate(templates.Input{Parent: unitParent(unitOrdered, "o", map[string]any{"keep": false})})
	require.NoError(t, err)
	eval = &evaluation{result: res, observed: map[string]any{}, graph: tpl.Graph()}
	assert.Empty(t, heldBack(eval), "no bucket desired: the children are left out by the spec, not waiting")
}
