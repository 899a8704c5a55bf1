package reconciler

import (
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/providers"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

// bucketRecord is the record of the Store template's resource under the
// name the fake provider gives it first.
func bucketRecord(policy string) resourceRecord {
	return resourceRecord{Name: "bucket", Provider: "fake", ExternalName: "data-0", Settings: map[string]string{"zone": "test"}, DeletionPolicy: policy}
}

// existingBucket is status.resources.bucket once data-0 was created.
func existingBucket() map[string]any {
	return map[string]any{"provider": "fake", "externalName": "data-0", "exists": true, "ready": true, "state": map[string]any{"name": "data-0"}}
}

func storeParent(spec map[string]any) *unstructured.Unstructured {
	s := map[string]any{"bucket": "data"}
	maps.Copy(s, spec)
	return unitParent(unitStore, "store", s)
}

// TestResourceRecordedBeforeCreate: the first reconcile only records the
// resource's name and the finalizer on the parent, without calling the
// provider, so a crash can never leave a resource the parent does not name;
// the next one creates it under that name and reports it.
func TestResourceRecordedBeforeCreate(t *testing.T) {
	store := storeParent(nil)
	e := newUnitEnv(t, unitStore, store)

	res := e.reconcileClean(store)
	assert.Equal(t, ctrl.Result{}, res)
	assert.Empty(t, e.provider.takeCalls(), "no provider call before the name is recorded")
	assert.Equal(t, map[string]int{"patch Store": 1}, e.takeWrites(), "one write: the record, no status")
	cur := e.reread(store)
	assert.Equal(t, []string{contract.Finalizer}, cur.GetFinalizers())
	assert.Equal(t, &resourceRecord{Name: "bucket", Provider: "fake", ExternalName: "data-0", Settings: map[string]string{"zone": "test"}, DeletionPolicy: "Delete"},
		recordOf(t, cur, "bucket"))
	assert.Nil(t, cur.Object["status"])

	res = e.reconcileClean(store)
	requireJittered(t, res.RequeueAfter)
	assert.Equal(t, []string{"apply data-0"}, e.provider.takeCalls())
	assert.Equal(t, map[string]int{"status Store": 1}, e.takeWrites())
	cur = e.reread(store)
	assert.Equal(t, existingBucket(), storedResource(cur, "bucket"))
	assert.Equal(t, "data-0", cur.Object["status"].(map[string]any)["bucketName"], "the template saw the resource in the same reconcile")
	assert.Equal(t, cond{metav1.ConditionTrue, contract.ReasonSynced, "children and resources are applied"}, condOf(e.condition(store, contract.ConditionSynced)))
	assert.Equal(t, cond{metav1.ConditionTrue, contract.ReasonReady, "all children are ready"}, condOf(e.condition(store, contract.ConditionReady)))
	assert.Empty(t, e.events.take())

	res = e.reconcileClean(store)
	requireJittered(t, res.RequeueAfter)
	assert.Equal(t, []string{"apply data-0"}, e.provider.takeCalls(), "the resync observes the resource again")
	assert.Empty(t, e.takeWrites(), "and writes nothing when nothing changed")
}

// TestResourceRecordFails: when the record cannot be stored (another
// writer changed the parent), the provider is still not called, and the
// next reconcile plans the same name.
func TestResourceRecordFails(t *testing.T) {
	store := storeParent(nil)
	e := newUnitEnv(t, unitStore, store)
	e.failWrites("patch Store", apierrors.NewConflict(schema.GroupResource{Group: "unit.cuengine.dev", Resource: "stores"}, "store", errors.New("the object has been modified")))

	res, err := e.reconcile(store)
	require.NoError(t, err, "a conflict waits, without an error")
	assert.Equal(t, ctrl.Result{RequeueAfter: ConflictDelay}, res)
	assert.Empty(t, e.provider.takeCalls())
	assert.Equal(t, map[string]int{"patch Store": 1}, e.takeWrites(), "no status write either")
	assert.Nil(t, recordOf(t, e.reread(store), "bucket"))

	e.failWrites("patch Store", nil)
	e.reconcileClean(store)
	assert.Empty(t, e.provider.takeCalls())
	assert.Equal(t, "data-0", recordOf(t, e.reread(store), "bucket").ExternalName, "the same name again")
	e.reconcileClean(store)
	assert.Equal(t, []string{"apply data-0"}, e.provider.takeCalls())
}

// TestResourceNameConflict: a name someone else holds moves the resource
// to its next name, unless the parent created a resource under it.
func TestResourceNameConflict(t *testing.T) {
	taken := providers.Terminal(providers.ReasonNameConflict, "name %s is taken", "data-0")

	t.Run("a name never created moves to the next", func(t *testing.T) {
		store := withRecords(t, storeParent(nil), bucketRecord("Delete"))
		e := newUnitEnv(t, unitStore, store)
		e.provider.failing("apply data-0", taken)

		res := e.reconcileClean(store)
		assert.Equal(t, ctrl.Result{}, res)
		assert.Equal(t, []string{"apply data-0"}, e.provider.takeCalls())
		assert.Equal(t, map[string]int{"patch Store": 1}, e.takeWrites(), "the new name recorded, before its create")
		assert.Equal(t, &resourceRecord{Name: "bucket", Provider: "fake", ExternalName: "data-1", Attempt: 1, Settings: map[string]string{"zone": "test"}, DeletionPolicy: "Delete"},
			recordOf(t, e.reread(store), "bucket"))
		assert.Equal(t, []unitEvent{{corev1.EventTypeWarning, providers.ReasonNameConflict,
			"resource bucket: name data-0 is taken by a resource this parent does not own; moving to data-1"}}, e.events.take())

		e.reconcileClean(store)
		assert.Equal(t, []string{"apply data-1"}, e.provider.takeCalls())
		assert.Equal(t, "data-1", storedResource(e.reread(store), "bucket")["externalName"])
		assert.Equal(t, metav1.ConditionTrue, e.condition(store, contract.ConditionSynced).Status)
	})

	t.Run("a name the parent created is not renamed", func(t *testing.T) {
		store := withRecords(t, storeParent(nil), bucketRecord("Delete"))
		store.Object["status"] = map[string]any{"resources": map[string]any{"bucket": existingBucket()}}
		e := newUnitEnv(t, unitStore, store)
		e.provider.failing("apply data-0", taken)

		res, err := e.reconcile(store)
		require.NoError(t, err, "a NameConflict waits for a person, without an error")
		assert.LessOrEqual(t, res.RequeueAfter, unitResync)
		requireJittered(t, res.RequeueAfter)
		msg := "resource bucket (data-0): NameConflict: name data-0 is taken"
		cur := e.reread(store)
		assert.Equal(t, "data-0", recordOf(t, cur, "bucket").ExternalName, "not renamed: a new name would leak the old resource")
		assert.Equal(t, existingBucket(), storedResource(cur, "bucket"))
		assert.Equal(t, cond{metav1.ConditionFalse, providers.ReasonNameConflict, msg}, condOf(e.condition(store, contract.ConditionSynced)))
		assert.Equal(t, cond{metav1.ConditionFalse, contract.ReasonNotSynced, "not synced: NameConflict"}, condOf(e.condition(store, contract.ConditionReady)))
		assert.Equal(t, map[string]int{"status Store": 1}, e.takeWrites())
		assert.Equal(t, []unitEvent{{corev1.EventTypeWarning, providers.ReasonNameConflict, msg}}, e.events.take())
	})
}

// TestResourceProviderErrors: a provider error is a problem on the
// status; a retryable one is returned for the backoff, another one waits for
// the resource resync.
func TestResourceProviderErrors(t *testing.T) {
	for _, tc := range []struct {
		name        string
		err         error
		reason, msg string
		transient   bool
	}{
		{"retryable", providers.Retryable(providers.ReasonUnavailable, errors.New("503 from the API")),
			providers.ReasonUnavailable, "resource bucket (data-0): Unavailable: 503 from the API", true},
		{"not retryable", providers.Terminal(providers.ReasonCredentialsError, "no credentials"),
			providers.ReasonCredentialsError, "resource bucket (data-0): CredentialsError: no credentials", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := withRecords(t, storeParent(nil), bucketRecord("Delete"))
			e := newUnitEnv(t, unitStore, store)
			e.provider.failing("apply data-0", tc.err)

			res, err := e.reconcile(store)
			if tc.transient {
				require.Error(t, err)
				assert.False(t, isTerminal(err))
				assert.ErrorContains(t, err, tc.msg)
				assert.Equal(t, ctrl.Result{}, res)
			} else {
				require.NoError(t, err)
				assert.LessOrEqual(t, res.RequeueAfter, unitResync)
				requireJittered(t, res.RequeueAfter)
			}
			assert.Equal(t, cond{metav1.ConditionFalse, tc.reason, tc.msg}, condOf(e.condition(store, contract.ConditionSynced)))
			assert.Equal(t, map[string]any{"provider": "fake", "externalName": "data-0"}, storedResource(e.reread(store), "bucket"),
				"the recorded name is mirrored, nothing observed")
			assert.Equal(t, map[string]int{"status Store": 1}, e.takeWrites())
		})
	}
}

// TestResourceDropped: a resource the template no longer produces is
// deleted through its provider (or kept, with deletionPolicy Orphan), and
// the parent forgets it: record and status entry.
func TestResourceDropped(t *testing.T) {
	for _, tc := range []struct {
		policy string
		calls  []string
		events []unitEvent
	}{
		{templates.DeletionPolicyDelete, []string{"delete data-0"}, []unitEvent{{corev1.EventTypeNormal, "Deleted", "Deleted fake resource data-0"}}},
		{templates.DeletionPolicyOrphan, nil, nil},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			store := withRecords(t, storeParent(map[string]any{"keep": false, "deletionPolicy": tc.policy}), bucketRecord(tc.policy))
			store.Object["status"] = map[string]any{"resources": map[string]any{"bucket": existingBucket()}}
			e := newUnitEnv(t, unitStore, store)

			e.reconcileClean(store)
			assert.Equal(t, tc.calls, e.provider.takeCalls())
			assert.Equal(t, tc.events, e.events.take())
			assert.Nil(t, recordOf(t, e.reread(store), "bucket"), "the record is removed")

			e.reconcileClean(store)
			e.reconcileClean(store)
			assert.Empty(t, e.provider.takeCalls(), "deleted once")
			cur := e.reread(store)
			assert.Nil(t, storedResource(cur, "bucket"), "status.resources forgets it")
			assert.Equal(t, "", cur.Object["status"].(map[string]any)["bucketName"], "and the template no longer observes it")
		})
	}
}

// TestDeletion: a parent being deleted has its resources deleted per
// their policy before its finalizer goes; what blocks that is reported on
// the status and retried per its class.
func TestDeletion(t *testing.T) {
	unavailable := providers.Retryable(providers.ReasonUnavailable, errors.New("503 from the API"))
	notEmpty := providers.Terminal("NotEmpty", "bucket data-0 holds 3 objects")
	kept := "; the finalizer is kept. To delete the parent and keep the resource, annotate it engine.cuengine.dev/deletion-policy=Orphan"
	for _, tc := range []struct {
		name       string
		rec        resourceRecord
		annotation string // the parent's deletion-policy annotation
		deleteErr  error
		calls      []string
		// when the parent stays:
		synced   cond
		terminal bool
		waits    bool
	}{
		{name: "policy Delete", rec: bucketRecord("Delete"), calls: []string{"delete data-0"}},
		{name: "template policy Orphan", rec: bucketRecord("Orphan")},
		{name: "parent annotation Orphan", rec: bucketRecord("Delete"), annotation: "Orphan"},
		{name: "unknown provider", rec: resourceRecord{Name: "bucket", Provider: "gone", ExternalName: "data-0", DeletionPolicy: "Delete"},
			synced:   cond{metav1.ConditionFalse, contract.ReasonUnknownProvider, `resource bucket: provider "gone" is not available in this engine; to delete the parent anyway, annotate it engine.cuengine.dev/deletion-policy=Orphan`},
			terminal: true},
		{name: "retryable delete error", rec: bucketRecord("Delete"), deleteErr: unavailable, calls: []string{"delete data-0"},
			synced: cond{metav1.ConditionFalse, providers.ReasonUnavailable, "deleting resource bucket (data-0): Unavailable: 503 from the API" + kept}},
		{name: "terminal delete error", rec: bucketRecord("Delete"), deleteErr: notEmpty, calls: []string{"delete data-0"},
			synced: cond{metav1.ConditionFalse, "NotEmpty", "deleting resource bucket (data-0): NotEmpty: bucket data-0 holds 3 objects" + kept},
			waits:  true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := withRecords(t, storeParent(nil), tc.rec)
			if tc.annotation != "" {
				a := store.GetAnnotations()
				a[contract.AnnotationDeletionPolicy] = tc.annotation
				store.SetAnnotations(a)
			}
			store.SetDeletionTimestamp(new(metav1.NewTime(time.Now())))
			e := newUnitEnv(t, unitStore, store)
			e.provider.failing("delete data-0", tc.deleteErr)

			res, err := e.reconcile(store)
			assert.Equal(t, tc.calls, e.provider.takeCalls())
			if tc.synced == (cond{}) {
				require.NoError(t, err)
				assert.Equal(t, ctrl.Result{}, res)
				assert.Nil(t, e.get(unitStore, unitNamespace, "store"), "the finalizer is removed: the parent is gone")
				assert.Equal(t, map[string]int{"patch Store": 1}, e.takeWrites())
				return
			}
			switch {
			case tc.terminal:
				assert.True(t, isTerminal(err), "terminal: %v", err)
			case tc.waits:
				require.NoError(t, err)
				assert.Equal(t, ctrl.Result{RequeueAfter: unitResync}, res)
			default:
				require.Error(t, err)
				assert.False(t, isTerminal(err), "transient: %v", err)
				assert.Equal(t, tc.synced.Message, err.Error())
			}
			assert.Equal(t, []string{contract.Finalizer}, e.reread(store).GetFinalizers(), "the finalizer is kept")
			assert.Equal(t, tc.synced, condOf(e.condition(store, contract.ConditionSynced)))
			assert.Equal(t, map[string]int{"status Store": 1}, e.takeWrites(), "the problem, on the status")
			assert.Equal(t, []unitEvent{{corev1.EventTypeWarning, tc.synced.Reason, tc.synced.Message}}, e.events.take())

			if tc.deleteErr != nil {
				e.provider.failing("delete data-0", nil)
				e.reconcileClean(store)
				assert.Equal(t, []string{"delete data-0"}, e.provider.takeCalls(), "retried")
				assert.Nil(t, e.get(unitStore, unitNamespace, "store"), "and finished once the provider succeeds")
			}
		})
	}
}

// TestDeletionDeletesUnownedChildren: children that cannot carry an
// owner reference (another namespace, cluster-scoped) are deleted by the
// engine when their parent goes, since the garbage collector will not.
func TestDeletionDeletesUnownedChildren(t *testing.T) {
	tenant := unitParent(unitTenant, "acme", map[string]any{})
	e := newUnitEnv(t, unitTenant, tenant)
	namespaceGVK := corev1.SchemeGroupVersion.WithKind("Namespace")

	e.reconcileClean(tenant)
	assert.Equal(t, map[string]int{"patch Tenant": 1}, e.takeWrites(), "the finalizer and inventory first")
	cur := e.reread(tenant)
	assert.Equal(t, []string{contract.Finalizer}, cur.GetFinalizers())
	assert.JSONEq(t, `["ConfigMap/tenant-acme/settings","Namespace//tenant-acme"]`, cur.GetAnnotations()[contract.AnnotationInventory])

	e.reconcileClean(tenant)
	assert.Equal(t, map[string]int{"apply Namespace": 1, "apply ConfigMap": 1}, e.takeWrites())
	require.NotNil(t, e.get(namespaceGVK, "", "tenant-acme"))
	require.NotNil(t, e.get(configMapGVK, "tenant-acme", "settings"))
	e.events.take()

	require.NoError(t, e.store.Delete(e.ctx, e.reread(tenant)))
	e.reconcileClean(tenant)
	assert.Nil(t, e.get(namespaceGVK, "", "tenant-acme"))
	assert.Nil(t, e.get(configMapGVK, "tenant-acme", "settings"))
	assert.Nil(t, e.get(unitTenant, unitNamespace, "acme"), "then the finalizer goes")
	assert.Equal(t, map[string]int{"delete Namespace": 1, "delete ConfigMap": 1, "patch Tenant": 1}, e.takeWrites())
	assert.ElementsMatch(t, []unitEvent{
		{corev1.EventTypeNormal, "Deleted", "Deleted Namespace /tenant-acme"},
		{corev1.EventTypeNormal, "Deleted", "Deleted ConfigMap tenant-acme/settings"},
	}, e.events.take())
}

// TestObservedResourcesReadStatus: what the template sees as
// observed.<name> (render.ObservedResources) is the state that
// status.resources records (resourceStatus.toMap) of each resource that
// exists, and nothing of the others: as the engine reads its own entries
// (storedResources).
func TestObservedResourcesReadStatus(t *testing.T) {
	state := map[string]any{"arn": "arn:bucket", "size": int64(3)}
	p := unitParent(unitStore, "store", map[string]any{})
	entries := map[string]any{
		"exists":     resourceStatus{Provider: "fake", ExternalName: "e1", Observed: true, Exists: true, Ready: true, State: state}.toMap(),
		"stateless":  resourceStatus{Provider: "fake", ExternalName: "e2", Observed: true, Exists: true}.toMap(),
		"gone":       resourceStatus{Provider: "fake", ExternalName: "e3", Observed: true, State: state}.toMap(),
		"unobserved": resourceStatus{Provider: "fake", ExternalName: "e4"}.toMap(),
		"garbage":    "not an entry",
	}
	require.NoError(t, unstructured.SetNestedField(p.Object, entries, "status", contract.StatusResources))

	observed := render.ObservedResources(p)
	assert.Equal(t, map[string]any{"exists": state}, observed)
	stored := map[string]any{}
	for name, rs := range storedResources(p) {
		if rs.Exists && rs.State != nil {
			stored[name] = rs.State
		}
	}
	assert.Equal(t, stored, observed, "as the engine reads its entries")
	observed["exists"].(map[string]any)["arn"] = "changed"
	assert.Equal(t, "arn:bucket", render.ObservedResources(p)["exists"].(map[string]any)["arn"], "a copy: the template's input does not alias the parent")
}
