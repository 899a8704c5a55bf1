package reconciler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
)

// settledMyKind returns an env whose MyKind "mk" has its Deployment "web"
// and its status, and whose last reconcile found nothing to change.
func settledMyKind(t *testing.T) (*unitEnv, *unstructured.Unstructured) {
	t.Helper()
	mk := unitParent(unitMyKind, "mk", map[string]any{"deploymentName": "web"})
	e := newUnitEnv(t, unitMyKind, mk)
	e.reconcileClean(mk) // applies the Deployment
	e.reconcileClean(mk) // writes the status
	require.NotNil(t, e.condition(mk, contract.ConditionSynced))
	e.takeWrites()
	e.events.take()
	return e, mk
}

// TestRememberedEvaluation: a new parent's second reconcile, once its
// Deployment exists without the status the template reads, is answered by
// the template's memory, and counted as such.
func TestRememberedEvaluation(t *testing.T) {
	mk := unitParent(unitMyKind, "mk-remembered", map[string]any{"deploymentName": "remembered"})
	e := newUnitEnv(t, unitMyKind, mk)
	evaluated, remembered := e.evaluations(), e.remembered()
	e.reconcileClean(mk) // applies the Deployment
	assert.Equal(t, remembered, e.remembered(), "a new input is evaluated")
	e.reconcileClean(mk) // writes the status
	assert.Equal(t, evaluated+2, e.evaluations())
	assert.Equal(t, remembered+1, e.remembered())
	assert.EqualValues(t, 0, e.reread(mk).Object["status"].(map[string]any)["readyReplicas"])
}

// TestRetiredTemplate: once its template is removed, a kind's parents
// are left alone, except that deletions are still finished.
func TestRetiredTemplate(t *testing.T) {
	t.Run("a live parent: nothing is written", func(t *testing.T) {
		mk := unitParent(unitMyKind, "mk", map[string]any{"deploymentName": "web"})
		e := newUnitEnv(t, unitMyKind, mk)
		e.kind.gone = true
		before := e.evaluations()

		res, err := e.reconcile(mk)
		require.NoError(t, err)
		assert.Equal(t, ctrl.Result{}, res)
		assert.Empty(t, e.takeWrites())
		assert.Empty(t, e.events.take())
		assert.Equal(t, before, e.evaluations(), "nothing evaluated")
		assert.Nil(t, e.get(deploymentGVK, unitNamespace, "web"))
		assert.Nil(t, e.reread(mk).Object["status"])
	})
	t.Run("a parent being deleted is still finished", func(t *testing.T) {
		store := withRecords(t, storeParent(nil), bucketRecord("Delete"))
		store.SetDeletionTimestamp(new(metav1.NewTime(time.Now())))
		e := newUnitEnv(t, unitStore, store)
		e.kind.gone = true

		e.reconcileClean(store)
		assert.Equal(t, []string{"delete data-0"}, e.provider.takeCalls())
		assert.Nil(t, e.get(unitStore, unitNamespace, "store"))
	})
}

// TestFingerprintSkip: a reconcile whose inputs are those of the last
// one that changed nothing evaluates nothing and writes nothing; a change
// of any input evaluates again.
func TestFingerprintSkip(t *testing.T) {
	t.Run("same inputs", func(t *testing.T) {
		e, mk := settledMyKind(t)
		before := e.evaluations()
		for range 3 {
			assert.Equal(t, ctrl.Result{}, e.reconcileClean(mk))
		}
		assert.Equal(t, before, e.evaluations(), "no evaluation")
		assert.Empty(t, e.takeWrites(), "no write")
		assert.Empty(t, e.events.take())
	})
	for _, tc := range []struct {
		name   string
		change func(e *unitEnv, mk *unstructured.Unstructured)
		writes map[string]int
	}{
		{"the parent's labels", func(e *unitEnv, mk *unstructured.Unstructured) {
			cur := e.reread(mk)
			cur.SetLabels(map[string]string{"team": "a"})
			e.update(cur)
		}, map[string]int{}},
		{"the parent's annotations", func(e *unitEnv, mk *unstructured.Unstructured) {
			cur := e.reread(mk)
			cur.SetAnnotations(map[string]string{"note": "x"})
			e.update(cur)
		}, map[string]int{}},
		{"the parent's generation", func(e *unitEnv, mk *unstructured.Unstructured) {
			cur := e.reread(mk)
			cur.SetGeneration(2)
			e.update(cur)
		}, map[string]int{"status MyKind": 1}}, // observedGeneration
		{"a child", func(e *unitEnv, mk *unstructured.Unstructured) {
			e.annotate(e.get(deploymentGVK, unitNamespace, "web"), "note", "x")
		}, map[string]int{}},
	} {
		t.Run("changed "+tc.name, func(t *testing.T) {
			e, mk := settledMyKind(t)
			before := e.evaluations()
			tc.change(e, mk)

			assert.Equal(t, ctrl.Result{}, e.reconcileClean(mk))
			assert.Equal(t, before+1, e.evaluations(), "evaluated again")
			assert.Equal(t, tc.writes, e.takeWrites())

			e.reconcileClean(mk)
			assert.Equal(t, before+1, e.evaluations(), "and settled again")
			assert.Empty(t, e.takeWrites())
		})
	}
}

// TestStatusWrittenOnlyOnChange: once settled, a change that does not
// affect the status writes nothing; one that does writes the status once.
func TestStatusWrittenOnlyOnChange(t *testing.T) {
	e, mk := settledMyKind(t)
	assert.Equal(t, cond{metav1.ConditionFalse, contract.ReasonWaiting, "waiting for Deployment web"}, condOf(e.condition(mk, contract.ConditionReady)))

	// A child edit that changes nothing the engine applied, and a label on
	// the parent: both evaluate, neither writes.
	e.annotate(e.get(deploymentGVK, unitNamespace, "web"), "note", "x")
	e.reconcileClean(mk)
	cur := e.reread(mk)
	cur.SetLabels(map[string]string{"team": "a"})
	e.update(cur)
	e.reconcileClean(mk)
	assert.Empty(t, e.takeWrites(), "no apply, no status write")
	assert.Empty(t, e.events.take())

	// The Deployment becomes ready: one status write.
	markUnitReady(t, e, "web", 1)
	e.reconcileClean(mk)
	assert.Equal(t, map[string]int{"status MyKind": 1}, e.takeWrites())
	assert.Equal(t, cond{metav1.ConditionTrue, contract.ReasonReady, "all children are ready"}, condOf(e.condition(mk, contract.ConditionReady)))
	assert.Equal(t, int64(1), e.reread(mk).Object["status"].(map[string]any)["readyReplicas"])

	e.reconcileClean(mk)
	assert.Empty(t, e.takeWrites(), "and not again")
}

// markUnitReady plays the Deployment controller: all replicas ready.
func markUnitReady(t *testing.T, e *unitEnv, name string, replicas int32) {
	t.Helper()
	d := &appsv1.Deployment{}
	require.NoError(t, e.store.Get(e.ctx, client.ObjectKey{Namespace: unitNamespace, Name: name}, d))
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas, UpdatedReplicas: replicas,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
		}}
	require.NoError(t, e.store.Status().Update(e.ctx, d))
}
