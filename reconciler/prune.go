package reconciler

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cuengine/engine/render"
)

// prune deletes the parent's children that the template no longer produces:
// a local name that disappeared, or one whose object changed name,
// namespace or kind. It runs only after a successful evaluation, so a
// broken template never deletes anything, and only on what observe proved
// to be the parent's. Dependents go first (order.go): a child that
// something still there depends on waits, named in Ready, for the event
// of that dependent's deletion. It returns the number of deletes.
func (r *Reconciler) prune(ctx context.Context, parent *unstructured.Unstructured, keep []*unstructured.Unstructured, live *render.LiveChildren, st *status) (int, error) {
	// Kept by object, whatever local name it had: an object the template
	// now produces under another local name was just applied as that one.
	kept := make(map[render.ChildKey]bool, len(keep))
	for _, d := range keep {
		kept[render.ObjectKeyOf(d)] = true
	}
	records, err := recordedResources(parent)
	if err != nil {
		return 0, err
	}
	order := newDependencyOrder(live.List(), records)
	var waits []deletionWait
	deletes := 0
	for _, c := range live.List() {
		if kept[render.ObjectKeyOf(c)] || c.GetDeletionTimestamp() != nil {
			continue
		}
		if deps := order.dependents(localName(c)); len(deps) > 0 {
			waits = append(waits, deletionWait{what: describe(c), dependents: deps})
			continue
		}
		err := r.writer.Delete(ctx, c, order.deleteOptions(c)...)
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return deletes, fmt.Errorf("deleting %s %s: %w", c.GetKind(), c.GetName(), err)
		}
		if err == nil {
			deletes++
			r.normal(parent, "Deleted", "Delete", "Deleted %s %s", c.GetKind(), c.GetName())
			log.FromContext(ctx).V(1).Info("pruned child", "child", localName(c), "object", c.GetNamespace()+"/"+c.GetName())
		}
	}
	st.recordWaits(waits)
	return deletes, nil
}
