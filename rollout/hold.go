package rollout

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

// maxHeldExamples bounds how many children a hold names.
const maxHeldExamples = 5

// HoldError is a template revision held because it would delete children
// that the parents' current revision produces. A file saved in two writes,
// or copied half-way, is a valid template that produces fewer children:
// rolling it out, even for a moment, would delete them. A held revision
// waits until a newer one replaces it, or a user confirms it (engine
// rollout resume), or the template declares rollout: allowDeletions: true.
type HoldError struct {
	// Deletes counts the children the new revision would delete.
	Deletes int
	// Examples names a few of them: "MyKind ns/name: Deployment ns/web".
	Examples []string
	// Templates are the paths of the templates that would delete.
	Templates []string
}

func (e *HoldError) Error() string {
	more := ""
	if n := e.Deletes - len(e.Examples); n > 0 {
		more = fmt.Sprintf(" and %d more", n)
	}
	return fmt.Sprintf("the new version of %s would delete %d children (%s%s); it waits for `engine rollout resume` (or rollout: allowDeletions: true in the template), in case the files are still being written",
		strings.Join(e.Templates, ", "), e.Deletes, strings.Join(e.Examples, "; "), more)
}

// Hold is what the hold check renders a new revision with: as the
// reconcile would, with the engine's one budget, so that a parent over a
// limit on the new revision is not evaluated again by its reconcile, and
// one that overran before is not evaluated past the budget.
type Hold struct {
	Scoper render.Scoper
	Limits render.Limits
	Budget *render.Budget
	// Observe is what the template sees of a parent whose live children
	// and resources are observed as live: their observed state with the
	// parent's references read as the reconcile reads them
	// (render.Observe), an error when one cannot be read or is missing
	// (the reconcile then changes nothing). Nil reads no references.
	Observe func(t *templates.Template, parent *unstructured.Unstructured, live map[string]any) (map[string]any, error)
}

// countDeletes evaluates t for a live parent, whose live children are list,
// and counts, into held, the children the result no longer produces. A
// parent t cannot evaluate is left to the reconcile, which reports it and
// deletes nothing.
func (h Hold) countDeletes(t *templates.Template, parent *unstructured.Unstructured, list []client.Object, held *HoldError) error {
	owned := render.OwnedOf(parent, list)
	if len(owned) == 0 {
		return nil
	}
	live, err := owned.Read()
	if err != nil {
		return err
	}
	observed := live.Observed(parent)
	if h.Observe != nil && t.HasReferences() {
		if observed, err = h.Observe(t, parent, observed); err != nil {
			return nil // the reconcile waits for them, deleting nothing
		}
	}
	out, err := render.Render(t, parent, observed, render.Options{Limits: h.Limits, Scoper: h.Scoper, Budget: h.Budget})
	if err != nil {
		return nil
	}
	kept := map[render.ChildKey]bool{}
	for _, obj := range out.Children {
		kept[render.ObjectKeyOf(obj)] = true
	}
	for _, c := range live.List() {
		if kept[render.ObjectKeyOf(c)] || render.IsDeclaredConnectionSecret(out.Result.Resources, c) {
			continue
		}
		held.Deletes++
		if len(held.Examples) < maxHeldExamples {
			held.Examples = append(held.Examples, fmt.Sprintf("%s %s/%s: %s %s/%s", parent.GetKind(), parent.GetNamespace(), parent.GetName(), c.GetKind(), c.GetNamespace(), c.GetName()))
		}
	}
	return nil
}
