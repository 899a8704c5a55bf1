package engine

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// prune deletes the parent's children that the template no longer produces:
// a local name that disappeared, or one whose object changed name,
// namespace or kind (the seed's cleanupOwnedResources). It runs only after a
// successful evaluation, so a broken template never deletes anything.
func (r *reconciler) prune(ctx context.Context, parent *unstructured.Unstructured, keep, existing []*unstructured.Unstructured) (int, error) {
	deletes := 0
	for _, c := range existing {
		if find(keep, c) != nil {
			continue
		}
		if c.GetLabels()[LabelParentUID] != string(parent.GetUID()) {
			continue // not provably this parent's: never delete
		}
		uid := c.GetUID()
		err := r.e.writer.Delete(ctx, c, client.Preconditions(metav1.Preconditions{UID: &uid}), client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return deletes, fmt.Errorf("deleting %s %s: %w", c.GetKind(), c.GetName(), err)
		}
		if err == nil {
			deletes++
			r.normal(parent, "Deleted", "Delete", "Deleted %s %s", c.GetKind(), c.GetName())
			log.FromContext(ctx).V(1).Info("pruned child", "child", c.GetLabels()[LabelChild], "object", c.GetNamespace()+"/"+c.GetName())
		}
	}
	return deletes, nil
}
