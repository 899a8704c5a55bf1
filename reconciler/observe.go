package reconciler

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/render"
)

// observe lists the parent's existing children of every watched kind: the
// objects labelled as its children that are provably its own
// (render.OwnedOf, render.IsOurs). An object that only carries the labels
// is invisible to every later step: it is never adopted, pruned or counted
// in the status. They are typed for the built-in kinds, unstructured for
// the others (the engine's childobjects.go); their metadata is enough to
// tell whether anything changed (settled.go), and Read gives their content.
func (r *Reconciler) observe(ctx context.Context, parent *unstructured.Unstructured) (render.OwnedChildren, error) {
	list, err := r.children.List(ctx, parent)
	if err != nil {
		return nil, err
	}
	return render.OwnedOf(parent, list), nil
}
