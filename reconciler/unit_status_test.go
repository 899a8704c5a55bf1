package reconciler

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"
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
	w := newStatusWriter(e.r.gvk, e.r.writer, e.r.recorder, func(types.NamespacedName) {}, nil)
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
	w := newStatusWriter(e.r.gvk, e.r.writer, e.r.recorder, func(types.NamespacedName) {}, nil)
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

// rewordReady stores the parent's Ready condition with another message,
// as an engine that worded it differently would have: the same status
// and reason.
func rewordReady(t *testing.T, e *unitEnv, parent *unstructured.Unstructured, message string) {
	t.Helper()
	cur := e.reread(parent)
	conds, _, _ := unstructured.NestedSlice(cur.Object, "status", "conditions")
	found := false
	for _, c := range conds {
		if m := c.(map[string]any); m["type"] == contract.ConditionReady {
			m["message"], found = message, true
		}
	}
	require.True(t, found, "a Ready condition")
	require.NoError(t, unstructured.SetNestedSlice(cur.Object, conds, "status", "conditions"))
	require.NoError(t, e.store.Status().Update(e.ctx, cur))
}

// TestStatusWriterPacesQuietWrites (issue 53 item 5): a status that
// differs from the stored one only where no one acts on it, here the
// wording of Ready's message as an upgrade brings it, waits for the
// writer's pace once the burst is spent; a status that changes what a
// person acts on (readyReplicas) goes at once, and takes the waiting
// one's place.
func TestStatusWriterPacesQuietWrites(t *testing.T) {
	e, mk := settledMyKind(t)
	w := newStatusWriter(e.r.gvk, e.r.writer, e.r.recorder, func(types.NamespacedName) {}, rate.NewLimiter(rate.Every(time.Hour), 1))
	e.r.status = w
	stop := w.start(e.ctx, 0) // no goroutines: flush writes what is due
	defer stop()
	want := condOf(e.condition(mk, contract.ConditionReady))

	rewordReady(t, e, mk, "worded by an older engine")
	e.annotate(e.get(deploymentGVK, unitNamespace, "web"), "note", "1") // new inputs
	e.reconcileQueued(mk)
	w.flush(e.ctx)
	assert.Equal(t, map[string]int{"status MyKind": 1}, e.takeWrites(), "within the burst: at once")
	assert.Equal(t, want, condOf(e.condition(mk, contract.ConditionReady)))

	rewordReady(t, e, mk, "worded by an older engine")
	e.annotate(e.get(deploymentGVK, unitNamespace, "web"), "note", "2")
	e.reconcileQueued(mk)
	w.flush(e.ctx)
	assert.Empty(t, e.takeWrites(), "past the burst: it waits")
	p, _ := w.pending(client.ObjectKeyFromObject(mk))
	require.NotNil(t, p, "still to write")
	assert.Equal(t, "worded by an older engine", e.condition(mk, contract.ConditionReady).Message)

	markUnitReady(t, e, "web", 1)
	e.reconcileQueued(mk)
	w.flush(e.ctx)
	assert.Equal(t, map[string]int{"status MyKind": 1}, e.takeWrites(), "a change that matters: at once")
	assert.Equal(t, int64(1), e.readyReplicas(mk))
	assert.NotEqual(t, "worded by an older engine", e.condition(mk, contract.ConditionReady).Message, "the waiting one replaced")
	p, _ = w.pending(client.ObjectKeyFromObject(mk))
	assert.Nil(t, p, "nothing left waiting")
}

// TestQuietChange: which differences are quiet (quietstatus.go).
func TestQuietChange(t *testing.T) {
	cond := func(typ, status, reason, message string) map[string]any {
		return map[string]any{"type": typ, "status": status, "reason": reason, "message": message, "observedGeneration": int64(2),
			"lastTransitionTime": "2026-12-01T00:00:00Z"}
	}
	stored := func() map[string]any {
		return map[string]any{
			"observedGeneration": int64(2),
			"conditions":         []any{cond("Ready", "True", "Ready", "all children are ready"), cond("Synced", "True", "Synced", "")},
			"readyReplicas":      int64(3),
			"templateRevision":   map[string]any{"number": int64(4), "hash": "abc"},
			"resources":          map[string]any{"bucket": map[string]any{"provider": "gcs", "externalName": "b-1", "exists": true, "ready": true}},
		}
	}
	for _, tc := range []struct {
		name  string
		edit  func(next map[string]any)
		quiet bool
	}{
		{"the same", func(map[string]any) {}, true},
		{"a message worded anew", func(n map[string]any) {
			n["conditions"] = []any{cond("Ready", "True", "Ready", "every child is ready"), cond("Synced", "True", "Synced", "")}
		}, true},
		{"a resource's details", func(n map[string]any) {
			n["resources"].(map[string]any)["bucket"].(map[string]any)["state"] = map[string]any{"location": "EU"}
		}, true},
		{"Ready's status", func(n map[string]any) {
			n["conditions"] = []any{cond("Ready", "False", "Ready", "all children are ready"), cond("Synced", "True", "Synced", "")}
		}, false},
		{"Ready's reason", func(n map[string]any) {
			n["conditions"] = []any{cond("Ready", "True", "Waiting", "all children are ready"), cond("Synced", "True", "Synced", "")}
		}, false},
		{"a condition more", func(n map[string]any) {
			n["conditions"] = append(n["conditions"].([]any), cond("Reconciling", "True", "Progressing", ""))
		}, false},
		{"the observed generation", func(n map[string]any) { n["observedGeneration"] = int64(3) }, false},
		{"a template field", func(n map[string]any) { n["readyReplicas"] = int64(2) }, false},
		{"a template field more", func(n map[string]any) { n["url"] = "https://example.com" }, false},
		{"the template revision", func(n map[string]any) { n["templateRevision"] = map[string]any{"number": int64(5), "hash": "def"} }, false},
		{"a reconcile request handled", func(n map[string]any) { n["lastHandledReconcileAt"] = "now" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := stored()
			tc.edit(next)
			assert.Equal(t, tc.quiet, quietChange(stored(), next))
		})
	}
	t.Run("a revision an older engine did not record", func(t *testing.T) {
		old := stored()
		delete(old, "templateRevision")
		assert.True(t, quietChange(old, stored()))
	})
	t.Run("a first status", func(t *testing.T) {
		assert.False(t, quietChange(nil, stored()))
		assert.False(t, quietChange(map[string]any{"observedGeneration": int64(0)}, stored()))
	})
}
