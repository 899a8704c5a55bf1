package reconciler

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/internal/jsoncmp"
	"github.com/cuengine/engine/render"
)

// keepingLive returns what to judge and apply of the desired child d,
// live as cur: d with the fields the template leaves to other writers
// holding their live values (render.KeepingLive), so they are neither
// judged as drift nor changed by the apply.
//
// Which keys of a Shared map the engine's apply owns is in the child's
// managed fields, and the child cache drops those. So a child with a
// Shared map that is about to be applied or dry-run is read once from the
// apiserver; one already as desired costs no read.
func (r *Reconciler) keepingLive(ctx context.Context, parent types.NamespacedName, d, cur *unstructured.Unstructured, hash string) (*unstructured.Unstructured, error) {
	kept := render.KeepingLive(d, cur)
	if !hasShared(d) || cur.GetManagedFields() != nil {
		return kept, nil
	}
	if cur.GetAnnotations()[contract.AnnotationAppliedHash] == hash && (r.applied.holds(parent, cur, hash) || jsoncmp.Contains(cur.Object, kept.Object)) {
		return kept, nil // no apply: the keys it would keep do not matter
	}
	fresh := &unstructured.Unstructured{}
	fresh.SetGroupVersionKind(cur.GroupVersionKind())
	if err := r.live.Get(ctx, client.ObjectKeyFromObject(cur), fresh); err != nil {
		return nil, fmt.Errorf("reading %s %s: %w", cur.GetKind(), cur.GetName(), err)
	}
	return render.KeepingLive(d, fresh), nil
}

// hasShared reports whether the desired child shares a map with other
// writers.
func hasShared(d *unstructured.Unstructured) bool {
	for _, mode := range render.Ownership(d) {
		if mode == contract.OwnershipShared {
			return true
		}
	}
	return false
}
