package reconciler

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
)

// The status writer (statuswriter.go) on the fake apiserver. The unit
// env's writer has no goroutines of its own: e.reconcile flushes it, and
// these tests call e.r.Reconcile to leave statuses queued, as they are when
// its goroutines are busy.

// reconcileQueued runs one reconcile of obj and leaves its status queued.
func (e *unitEnv) reconcileQueued(obj client.Object) {
	e.t.Helper()
	_, err := e.r.Reconcile(e.ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
	require.NoError(e.t, err)
}

// readyReplicas returns the parent's stored status.readyReplicas.
func (e *unitEnv) readyReplicas(parent *unstructured.Unstructured) int64 {
	e.t.Helper()
	n, _, _ := unstructured.NestedInt64(e.reread(parent).Object, "status", "readyReplicas")
	return n
}

// clearUnitStatus plays the Deployment controller before it has looked at
// the Deployment: no status.
func clearUnitStatus(t *testing.T, e *unitEnv, name string) {
	t.Helper()
	d := &appsv1.Deployment{}
	require.NoError(t, e.store.Get(e.ctx, client.ObjectKey{Namespace: unitNamespace, Name: name}, d))
	d.Status = appsv1.DeploymentStatus{}
	require.NoError(t, e.store.Status().Update(e.ctx, d))
}

// optimisticLock refuses a write of obj that is not over its stored
// resource version, as the apiserver does, before the write reaches the
// fake client (a test changes the parent from here).
func optimisticLock(e *unitEnv, obj client.Object) error {
	cur := e.get(obj.GetObjectKind().GroupVersionKind(), obj.GetNamespace(), obj.GetName())
	require.NotNil(e.t, cur)
	if obj.GetResourceVersion() == cur.GetResourceVersion() {
		return nil
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	return apierrors.NewConflict(schema.GroupResource{Group: gvk.Group, Resource: strings.ToLower(gvk.Kind) + "s"}, obj.GetName(), errors.New("the object has been modified"))
}

// TestStatusWriterCoalesces: statuses built for a parent before its
// write starts are written once, the latest; one that goes back to what is
// stored is not written at all.
func TestStatusWriterCoalesces(t *testing.T) {
	t.Run("the latest of several", func(t *testing.T) {
		e, mk := settledMyKind(t)
		for _, replicas := range []int32{3, 2, 1} { // of 1
			markUnitReady(t, e, "web", replicas)
			e.reconcileQueued(mk)
		}
		assert.Empty(t, e.takeWrites(), "nothing written by the reconciles")

		e.r.status.flush(e.ctx)
		assert.Equal(t, map[string]int{"status MyKind": 1}, e.takeWrites())
		assert.Equal(t, int64(1), e.readyReplicas(mk))
		assert.Equal(t, cond{metav1.ConditionTrue, contract.ReasonReady, "all children are ready"}, condOf(e.condition(mk, contract.ConditionReady)))
	})
	t.Run("back to what is stored", func(t *testing.T) {
		e, mk := settledMyKind(t)
		stored := e.reread(mk).Object["status"]
		markUnitReady(t, e, "web", 1)
		e.reconcileQueued(mk)
		clearUnitStatus(t, e, "web")
		e.reconcileQueued(mk)

		e.r.status.flush(e.ctx)
		assert.Empty(t, e.takeWrites())
		assert.Equal(t, stored, e.reread(mk).Object["status"], "transition times included")
	})
}

// TestStatusWriterPending: a reconcile whose status equals the one
// still pending does not queue it again, and its inputs are recorded as
// settled only once that status is stored.
func TestStatusWriterPending(t *testing.T) {
	e, mk := settledMyKind(t)
	markUnitReady(t, e, "web", 1)
	e.reconcileQueued(mk)
	e.annotate(e.get(deploymentGVK, unitNamespace, "web"), "note", "x") // new inputs, the same status
	e.reconcileQueued(mk)

	before := e.evaluations()
	e.reconcileQueued(mk)
	assert.Equal(t, before+1, e.evaluations(), "not settled while its status is not stored")

	e.r.status.flush(e.ctx)
	assert.Equal(t, map[string]int{"status MyKind": 1}, e.takeWrites())
	e.reconcileClean(mk)
	assert.Equal(t, before+1, e.evaluations(), "settled once it is")
	assert.Empty(t, e.takeWrites())
}

// TestStatusWriterInFlight: a status built while the previous write of
// the parent is in flight is written after it, over what it stored: no
// conflict, no reconcile again.
func TestStatusWriterInFlight(t *testing.T) {
	e, mk := settledMyKind(t)
	markUnitReady(t, e, "web", 1)
	e.reconcileQueued(mk)
	e.check = func(key string, obj client.Object) error {
		if key != "status MyKind" {
			return nil
		}
		if err := optimisticLock(e, obj); err != nil {
			return err
		}
		if e.readyReplicas(mk) == 0 {
			markUnitReady(t, e, "web", 2) // while the first write is in flight
			e.reconcileQueued(mk)
		}
		return nil
	}

	e.r.status.flush(e.ctx)
	assert.Equal(t, map[string]int{"status MyKind": 2}, e.takeWrites())
	assert.Equal(t, int64(2), e.readyReplicas(mk))
	assert.Empty(t, e.requeued)
}

// TestStatusWriterConflict: a write over a parent that changed since
// its status was built is dropped, with the status built on it, and the
// parent is reconciled again.
func TestStatusWriterConflict(t *testing.T) {
	e, mk := settledMyKind(t)
	markUnitReady(t, e, "web", 1)
	e.reconcileQueued(mk)
	e.check = func(key string, obj client.Object) error {
		if key == "status MyKind" && len(e.requeued) == 0 {
			markUnitReady(t, e, "web", 2)
			e.reconcileQueued(mk)                 // built on the write about to conflict
			e.annotate(e.reread(mk), "note", "x") // someone else's write comes first
		}
		return optimisticLock(e, obj)
	}

	e.r.status.flush(e.ctx)
	assert.Equal(t, map[string]int{"status MyKind": 1}, e.takeWrites(), "the conflict, and no write built on it")
	assert.Equal(t, []types.NamespacedName{client.ObjectKeyFromObject(mk)}, e.requeued)
	assert.Equal(t, int64(0), e.readyReplicas(mk))

	e.reconcileClean(mk)
	assert.Equal(t, map[string]int{"status MyKind": 1}, e.takeWrites())
	assert.Equal(t, int64(2), e.readyReplicas(mk))
}

// TestStatusWriterRetries: a write that fails is retried with backoff,
// as the newest status when a reconcile built one meanwhile; the parent's
// reconciles are not held by it.
func TestStatusWriterRetries(t *testing.T) {
	e, mk := settledMyKind(t)
	w := newStatusWriter(e.r.gvk, e.r.writer, e.r.recorder, func(types.NamespacedName) {})
	e.r.status = w
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	stop := w.start(ctx, 2)
	defer stop()
	e.failWrites("status MyKind", errors.New("the apiserver is down"))

	markUnitReady(t, e, "web", 1)
	e.reconcileQueued(mk)
	require.Eventually(t, func() bool { return e.takeWrites()["status MyKind"] > 0 }, 10*time.Second, 5*time.Millisecond, "tried")
	markUnitReady(t, e, "web", 2)
	e.reconcileQueued(mk)
	require.Eventually(t, func() bool { return e.takeWrites()["status MyKind"] > 0 }, 10*time.Second, 5*time.Millisecond, "tried again")
	assert.Equal(t, int64(0), e.readyReplicas(mk))

	e.failWrites("status MyKind", nil)
	require.Eventually(t, func() bool { return e.readyReplicas(mk) == 2 }, 10*time.Second, 5*time.Millisecond, "written once the apiserver is back")
	require.Eventually(t, func() bool { p, _ := w.pending(client.ObjectKeyFromObject(mk)); return p == nil }, 10*time.Second, 5*time.Millisecond)
}

// TestStatusWriterParentGone: a status whose parent is deleted before
// it is written is dropped, not retried.
func TestStatusWriterParentGone(t *testing.T) {
	e, mk := settledMyKind(t)
	markUnitReady(t, e, "web", 1)
	e.reconcileQueued(mk)
	require.NoError(t, e.store.Delete(e.ctx, e.reread(mk)))

	e.r.status.flush(e.ctx)
	assert.Equal(t, map[string]int{"status MyKind": 1}, e.takeWrites(), "tried once")
	p, _ := e.r.status.pending(client.ObjectKeyFromObject(mk))
	assert.Nil(t, p, "nothing left to write")
	assert.Empty(t, e.requeued)
}

// TestStatusWriterStopped: the statuses not written when the writer
// stops are dropped; the kind's next start reconciles every parent again.
func TestStatusWriterStopped(t *testing.T) {
	e, mk := settledMyKind(t)
	w := newStatusWriter(e.r.gvk, e.r.writer, e.r.recorder, func(types.NamespacedName) {})
	e.r.status = w
	stop := w.start(e.ctx, 0)
	markUnitReady(t, e, "web", 1)
	e.reconcileQueued(mk)
	stop()

	p, _ := w.pending(client.ObjectKeyFromObject(mk))
	assert.Nil(t, p)
	e.reconcileQueued(mk) // a reconcile left over from the stop
	p, _ = w.pending(client.ObjectKeyFromObject(mk))
	assert.Nil(t, p)
	assert.Empty(t, e.takeWrites())
}

// TestStatusPatch: the merge patch a status write sends stores what a
// write of the whole object with that status would: a field the new status
// no longer has is removed, a list is replaced, and the write is
// conditional on the resource version it was built on.
func TestStatusPatch(t *testing.T) {
	stored := map[string]any{"readyReplicas": int64(2), "url": "http://a", "conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}
	next := map[string]any{"readyReplicas": int64(3), "conditions": []any{map[string]any{"type": "Ready", "status": "False"}}}
	patch, err := statusPatch("42", stored, next)
	require.NoError(t, err)
	assert.JSONEq(t, `{"metadata":{"resourceVersion":"42"},"status":{"readyReplicas":3,"url":null,"conditions":[{"type":"Ready","status":"False"}]}}`, string(patch))

	first, err := statusPatch("7", nil, next)
	require.NoError(t, err)
	assert.JSONEq(t, `{"metadata":{"resourceVersion":"7"},"status":{"readyReplicas":3,"conditions":[{"type":"Ready","status":"False"}]}}`, string(first))
}
