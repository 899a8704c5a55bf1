package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cuengine/engine/templates"
)

// maxHeldExamples bounds how many children a hold names.
const maxHeldExamples = 5

// HoldError is a template change held back because it would delete
// children: a file saved in two writes, or copied half-way, is a valid
// template that produces fewer children, and serving it for a moment would
// delete them. The change is served once it has stayed on disk, unchanged,
// for the hold (Options.DeleteHold), so a deliberate removal goes through
// and a transient one never does.
type HoldError struct {
	// Deletes counts the children the new templates would delete.
	Deletes int
	// Examples names a few of them: "MyKind ns/name: Deployment ns/web".
	Examples []string
	// Templates are the paths of the templates that would delete.
	Templates []string
	// Until is when the change is served if the files stay as they are.
	Until time.Time
}

func (e *HoldError) Error() string {
	more := ""
	if n := e.Deletes - len(e.Examples); n > 0 {
		more = fmt.Sprintf(" and %d more", n)
	}
	return fmt.Sprintf("held: the new version of %s would delete %d children (%s%s); it is served at %s if the files stay as they are (--template-delete-hold), in case they are still being written",
		strings.Join(e.Templates, ", "), e.Deletes, strings.Join(e.Examples, "; "), more, e.Until.UTC().Format(time.TimeOnly))
}

// holdDeletes refuses, for the hold, a set whose changed templates would
// delete children of live parents. gen identifies the reload: the hold
// starts with the first reload that found deletions and ends with the
// next reload.
func (e *Engine) holdDeletes(ctx context.Context, set *templates.Set, gen uint64) error {
	if e.opts.DeleteHold <= 0 {
		return nil
	}
	held, err := e.wouldDelete(ctx, set)
	if err != nil || held.Deletes == 0 {
		return err
	}
	e.mu.Lock()
	if e.holdGen != gen {
		e.holdGen, e.holdSince = gen, time.Now()
	}
	held.Until = e.holdSince.Add(e.opts.DeleteHold)
	e.mu.Unlock()
	if !time.Now().Before(held.Until) {
		log.FromContext(ctx).Info("serving held templates: they stayed unchanged for the hold", "templates", held.Templates, "deletes", held.Deletes)
		return nil
	}
	return held
}

// wouldDelete evaluates the changed templates for every live parent of
// their kind and counts the live children the result no longer produces.
// A parent the new template cannot evaluate is left to the reconcile,
// which reports it and deletes nothing.
func (e *Engine) wouldDelete(ctx context.Context, set *templates.Set) (*HoldError, error) {
	held := &HoldError{}
	for _, t := range set.Templates() {
		kc := e.kind(t.GVK)
		if kc == nil || kc.template().Hash == t.Hash || !kc.isRunning() {
			continue
		}
		parents, err := e.listParents(ctx, t.GVK)
		if err != nil {
			return nil, err
		}
		before := held.Deletes
		for i := range parents {
			if err := e.countDeletes(ctx, kc, t, &parents[i], held); err != nil {
				return nil, err
			}
		}
		if held.Deletes > before {
			held.Templates = append(held.Templates, t.Path)
		}
	}
	return held, nil
}

func (e *Engine) countDeletes(ctx context.Context, kc *kindController, t *templates.Template, parent *unstructured.Unstructured, held *HoldError) error {
	list, err := kc.list(ctx, parent)
	if err != nil {
		return err
	}
	inv := inventoryOf(parent)
	list = slices.DeleteFunc(list, func(c *unstructured.Unstructured) bool { return !isOurs(parent, c, inv) })
	if len(list) == 0 {
		return nil
	}
	live := newLiveChildren(list)
	out, err := evaluateWithin(t, templates.Input{Parent: parent, Observed: live.observed(parent)}, e.opts.Limits.EvaluationTimeout)
	if err != nil {
		return nil
	}
	kept := map[childKey]bool{}
	for _, c := range out.Children {
		if obj, err := Desired(parent, t.Policy, e.scoper, c); err == nil {
			kept[objectKeyOf(obj)] = true
		}
	}
	for _, c := range list {
		if kept[objectKeyOf(c)] {
			continue
		}
		held.Deletes++
		if len(held.Examples) < maxHeldExamples {
			held.Examples = append(held.Examples, fmt.Sprintf("%s %s/%s: %s %s/%s", parent.GetKind(), parent.GetNamespace(), parent.GetName(), c.GetKind(), c.GetNamespace(), c.GetName()))
		}
	}
	return nil
}
