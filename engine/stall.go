package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// DefaultStallAfter is how long every worker of a kind must have been held
// by the same reconciles before the kind counts as stalled. A reconcile
// normally takes milliseconds; an evaluation is bounded by
// --evaluation-timeout and every apiserver and provider call by its own
// timeout, so two minutes with no worker free is never normal.
const DefaultStallAfter = 2 * time.Minute

// workers tracks the reconciles of one kind in flight, so that readiness
// can say when a kind is stalled: every worker held for longer than
// stallAfter, so that no other parent of the kind is reconciled.
type workers struct {
	size       int // the kind's MaxConcurrentReconciles
	stallAfter time.Duration
	now        func() time.Time

	mu      sync.Mutex
	running map[reconcile.Request]time.Time
}

func newWorkers(size int, stallAfter time.Duration) *workers {
	return &workers{size: size, stallAfter: stallAfter, now: time.Now, running: map[reconcile.Request]time.Time{}}
}

// wrap counts each reconcile of next while it runs.
func (w *workers) wrap(next reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
		w.begin(req)
		defer w.end(req)
		return next.Reconcile(ctx, req)
	})
}

func (w *workers) begin(req reconcile.Request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.running[req] = w.now()
}

func (w *workers) end(req reconcile.Request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.running, req)
}

// stalled describes the kind's state when every worker has been held for
// longer than stallAfter, and is empty otherwise. The workqueue never hands
// one parent to two workers, so size long reconciles mean no worker is free.
func (w *workers) stalled() string {
	if w.stallAfter <= 0 {
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	var held int
	var oldest reconcile.Request
	var since time.Time
	for req, start := range w.running {
		if now.Sub(start) < w.stallAfter {
			continue
		}
		held++
		if since.IsZero() || start.Before(since) || start.Equal(since) && req.String() < oldest.String() {
			oldest, since = req, start
		}
	}
	if held == 0 || held < w.size {
		return ""
	}
	return fmt.Sprintf("stalled: all %d workers held for more than %s, the longest by %s for %s; no other object of this kind is reconciled meanwhile",
		w.size, w.stallAfter, oldest, now.Sub(since).Round(time.Second))
}
