package diff

import (
	"context"
	"fmt"
	"maps"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

// missingReferenceError is a parent the engine would leave alone: a
// reference of it does not exist.
type missingReferenceError struct{ err error }

func (e *missingReferenceError) Error() string { return e.err.Error() }

// withReferences returns the observed state with the live view of each
// template's references (render.ResolveReferences, render.Observed), read
// from the cluster as the engine reads them. A reference that does not
// exist is a *missingReferenceError: the engine would wait, changing
// nothing.
func (d *Differ) withReferences(ctx context.Context, parent *unstructured.Unstructured, observed map[string]any, ts ...*templates.Template) (map[string]any, error) {
	out := maps.Clone(observed)
	if out == nil {
		out = map[string]any{}
	}
	for _, t := range ts {
		refs, err := render.ResolveReferences(t, parent, render.MapperScoper{Mapper: d.Mapper}, d.Limits)
		if err != nil {
			return nil, err
		}
		var missing []templates.Reference
		for _, ref := range refs {
			objs, err := d.readReference(ctx, ref)
			if err != nil {
				return nil, err
			}
			view, ok := render.Observed(ref, objs)
			if !ok {
				missing = append(missing, ref)
				continue
			}
			out[ref.Name] = view
		}
		if len(missing) > 0 {
			return nil, &missingReferenceError{render.MissingReferences(missing, 0)}
		}
	}
	return out, nil
}

// readReference gets the referenced object, or lists the selected ones,
// live.
func (d *Differ) readReference(ctx context.Context, ref templates.Reference) ([]*unstructured.Unstructured, error) {
	objs, err := render.ReadReference(ctx, d.Client, ref)
	if err != nil {
		return nil, fmt.Errorf("reading reference %s: %w", ref.Name, err)
	}
	return objs, nil
}
