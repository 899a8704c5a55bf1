package reconciler

import (
	"context"
	"fmt"
	"maps"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

// pruneRemote deletes, in every cluster that answers, the parent's
// children there that the template no longer produces, dependents first
// (order.go). It runs only after a successful evaluation, and never in a
// cluster that cannot be read: what is there is unknown, not gone.
func (r *Reconciler) pruneRemote(ctx context.Context, parent *unstructured.Unstructured, rc *remoteChildren, st *status) int {
	deletes := 0
	var waits []deletionWait
	for _, name := range slices.Sorted(maps.Keys(rc.clusters)) {
		cl := rc.clusters[name]
		if cl.c == nil {
			continue
		}
		kept := map[render.ChildKey]bool{}
		for _, d := range append(slices.Clip(cl.desired), cl.held...) {
			kept[render.ObjectKeyOf(d)] = true
		}
		var gone []*unstructured.Unstructured
		for _, c := range cl.live {
			if !kept[render.ObjectKeyOf(c)] {
				gone = append(gone, c)
			}
		}
		n, w, err := r.deleteIn(ctx, parent, cl, gone)
		deletes += n
		waits = append(waits, w...)
		if err != nil {
			cl.fail(ctx, err)
		}
	}
	st.recordWaits(waits)
	st.pruneHeld = st.pruneHeld || len(waits) > 0
	return deletes
}

// deleteIn deletes the given children of one cluster, each once nothing
// there that depends on it is left, and returns what waits.
func (r *Reconciler) deleteIn(ctx context.Context, parent *unstructured.Unstructured, cl *remoteCluster, gone []*unstructured.Unstructured) (int, []deletionWait, error) {
	order := newDependencyOrder(cl.live, nil)
	deletes := 0
	var waits []deletionWait
	for _, c := range gone {
		if c.GetDeletionTimestamp() != nil {
			continue
		}
		if deps := order.dependents(localName(c)); len(deps) > 0 {
			waits = append(waits, deletionWait{what: describe(c) + " in cluster " + cl.name, dependents: deps})
			continue
		}
		err := cl.c.Delete(ctx, c, order.deleteOptions(c)...)
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return deletes, waits, fmt.Errorf("deleting %s %s in cluster %s: %w", c.GetKind(), c.GetName(), cl.name, err)
		}
		if err == nil {
			deletes++
			r.normal(parent, "Deleted", "Delete", "Deleted %s %s in cluster %s", c.GetKind(), c.GetName(), cl.name)
		}
	}
	return deletes, waits, nil
}

// deleteRemote deletes, for a parent being deleted, its children in every
// workload cluster its inventory names, dependents first. It reports
// false while something there is left to wait for: a cluster that cannot
// be read (its children are unknown, not gone), or a child that must
// outlive a dependent. A parent annotated with
// contract.AnnotationDeletionPolicy=Orphan leaves them where they are.
func (r *Reconciler) deleteRemote(ctx context.Context, parent *unstructured.Unstructured, st *status) bool {
	if len(render.InventoryOf(parent).Remote()) == 0 {
		return true
	}
	if parent.GetAnnotations()[contract.AnnotationDeletionPolicy] == templates.DeletionPolicyOrphan {
		return true
	}
	rc := r.observeRemote(ctx, parent)
	var waits []deletionWait
	for _, name := range slices.Sorted(maps.Keys(rc.clusters)) {
		cl := rc.clusters[name]
		if cl.c == nil {
			continue
		}
		_, w, err := r.deleteIn(ctx, parent, cl, cl.live)
		waits = append(waits, w...)
		if err != nil {
			cl.fail(ctx, err)
		}
	}
	rc.report(st, fmt.Sprintf("; the finalizer is kept until the cluster answers, or the parent is annotated %s=Orphan", contract.AnnotationDeletionPolicy))
	if len(waits) > 0 {
		st.recordWaits(waits)
		return false
	}
	for _, cl := range rc.clusters {
		if cl.err != nil {
			return false
		}
	}
	return true
}
