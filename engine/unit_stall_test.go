package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestStalled: a kind is stalled when every worker has been held for
// longer than stallAfter, not when some are, nor when all are but briefly.
func TestStalled(t *testing.T) {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := newWorkers(2, time.Minute)
	w.now = func() time.Time { return clock }
	req := func(name string) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}
	}

	w.begin(req("slow"))
	clock = clock.Add(30 * time.Second)
	w.begin(req("slower"))
	assert.Empty(t, w.stalled(), "both workers busy, neither for a minute")

	clock = clock.Add(45 * time.Second)
	assert.Empty(t, w.stalled(), "one worker held for 75s, the other is within the minute")

	clock = clock.Add(30 * time.Second)
	assert.Equal(t, "stalled: all 2 workers held for more than 1m0s, the longest by ns/slow for 1m45s; no other object of this kind is reconciled meanwhile", w.stalled())

	w.end(req("slower"))
	assert.Empty(t, w.stalled(), "a worker is free again")
}

// TestStalledCountsReconciles: the wrapper counts a reconcile while it
// runs, including one that fails, and forgets it when it returns.
func TestStalledCountsReconciles(t *testing.T) {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := newWorkers(1, time.Minute)
	w.now = func() time.Time { return clock }
	inside := make(chan string, 1)
	wrapped := w.wrap(reconcile.Func(func(context.Context, ctrl.Request) (ctrl.Result, error) {
		clock = clock.Add(2 * time.Minute) // the reconcile takes two minutes
		inside <- w.stalled()
		return ctrl.Result{}, assert.AnError
	}))
	_, err := wrapped.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "x"}})
	assert.ErrorIs(t, err, assert.AnError)
	assert.Contains(t, <-inside, "stalled: all 1 workers held", "counted while it ran")
	assert.Empty(t, w.stalled(), "forgotten once it returned")
}
