package engine

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cuengine/engine/contract"
)

// watchCRDs retries, when the cluster's CRDs change, the parents refused
// for a kind the cluster did not serve: a child or a reference of a kind
// whose CRD was not installed yet is refused (ChildRefused or
// ReferenceRefused, "no matches for kind"), and nothing else would touch
// the parent once the CRD is established. It watches the CRDs' metadata
// only (a CRD's schema can be megabytes): a CRD's creation and the status
// write that establishes it each change it. The REST mapper learns the new
// kind on the retry's first question about it (restmapper.go).
//
// It returns the loop that retries; the caller runs it and waits for it.
func (e *Engine) watchCRDs(ctx context.Context) (func(), error) {
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	inf, err := e.mgr.GetCache().GetInformer(ctx, crd, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("watching CustomResourceDefinitions: %w", err)
	}
	changed := make(chan struct{}, 1)
	poke := func() {
		select {
		case changed <- struct{}{}:
		default: // a retry is already due: it sees this change too
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(_ any, initial bool) {
			if !initial {
				poke()
			}
		},
		UpdateFunc: func(_, _ any) { poke() },
	}); err != nil {
		return nil, fmt.Errorf("watching CustomResourceDefinitions: %w", err)
	}
	return func() { followUpRetries(ctx, changed, crdFollowUps, func() int { return e.retryUnserved(ctx) }) }, nil
}

// followUpRetries calls retry on every change, and, while retry says it
// queued some parent, again after each of the waits in turn; a change
// starts the waits over. A CRD is established before the apiserver's
// discovery serves its kind (two controllers of the apiserver, neither
// waiting for the other), so the retry on a CRD's last change can be
// refused again, and no further change would come.
func followUpRetries(ctx context.Context, changed <-chan struct{}, waits []time.Duration, retry func() int) {
	followUp := time.NewTimer(time.Hour)
	followUp.Stop()
	defer followUp.Stop()
	next := len(waits)
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
			next = 0
		case <-followUp.C:
		}
		if retry() == 0 || next == len(waits) {
			followUp.Stop()
			continue
		}
		followUp.Reset(waits[next])
		next++
	}
}

// crdFollowUps are the waits between the retries that follow a CRD
// change while a parent is still refused: about a minute in all, far
// longer than the apiserver takes to serve an established CRD's kind.
var crdFollowUps = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second}

// retryUnserved queues every parent whose last reconcile was refused
// (Synced=False, ChildRefused or ReferenceRefused), of every kind, and
// returns how many it queued.
func (e *Engine) retryUnserved(ctx context.Context) int {
	e.mu.Lock()
	kinds := make([]*kindController, 0, len(e.kinds))
	for _, kc := range e.kinds {
		kinds = append(kinds, kc)
	}
	e.mu.Unlock()
	queued := 0
	for _, kc := range kinds {
		if !kc.isRunning() {
			continue
		}
		parents, err := e.listParents(ctx, kc.gvk)
		if err != nil {
			log.FromContext(ctx).Error(err, "cannot list parents to retry after a CRD change", "kind", contract.KindString(kc.gvk))
			continue
		}
		for i := range parents {
			if refused(&parents[i]) {
				kc.Enqueue(&parents[i])
				queued++
			}
		}
	}
	return queued
}

// refused reports whether a parent's Synced condition says a child or a
// reference was refused.
func refused(parent *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(parent.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == contract.ConditionSynced {
			return m["status"] == string(metav1.ConditionFalse) &&
				(m["reason"] == contract.ReasonChildRefused || m["reason"] == contract.ReasonReferenceRefused)
		}
	}
	return false
}
