package reconciler

import (
	"context"
	"maps"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates"
	"github.com/cuengine/engine/templates/graph"
)

// evaluation is what the template made of one parent.
type evaluation struct {
	result *templates.Result
	// children are the objects to apply: the template's children with the
	// engine's labels and owner reference, the policy enforced.
	children []*unstructured.Unstructured
	// observed is what the template saw as observed.
	observed map[string]any
	// graph is the template's dependency graph, for the Ready message.
	graph *graph.Graph
	// held are the children not created yet that wait for what they
	// depend on to be ready (ready.go); waits says so, for Ready.
	held  []*unstructured.Unstructured
	waits []string
}

// evaluate runs the template for the parent, within the limits
// (render.Render, limits.go). An evaluation error, or a limit exceeded, is a terminal
// problem: nothing changes until the parent or the template does.
func (r *Reconciler) evaluate(ctx context.Context, t *templates.Template, parent *unstructured.Unstructured, observed map[string]any, st *status) (*evaluation, error) {
	out, err := r.boundedRender(t, parent, observed)
	if merr := r.markOverran(ctx, t, parent, err); merr != nil { // limits.go
		return nil, merr
	}
	if err != nil {
		return nil, st.templateFailed(err)
	}
	st.template.record(out.Result.Status)
	// A refused child is a terminal problem of its own; the others go on.
	for _, err := range out.Refused {
		st.fail(contract.ReasonChildRefused, err)
	}
	return &evaluation{result: out.Result, children: out.Children, observed: observed, graph: t.Graph()}, nil
}

// reevaluate runs the template again when the resources step saw a
// resource appear, change or go, so a child that depends on it is applied
// (and the template's status written) from what is true now, in this same
// reconcile.
func (r *Reconciler) reevaluate(ctx context.Context, t *templates.Template, parent *unstructured.Unstructured, eval *evaluation, st *status) (*evaluation, error) {
	var observed map[string]any
	for name, rs := range st.resources {
		old, had := eval.observed[name]
		if rs == nil || !rs.Exists || rs.State == nil {
			if had {
				observed = cloneOnce(observed, eval.observed)
				delete(observed, name)
			}
		} else if !had || !equality.Semantic.DeepEqual(old, rs.State) {
			observed = cloneOnce(observed, eval.observed)
			observed[name] = rs.State
		}
	}
	if observed == nil {
		return eval, nil
	}
	return r.evaluate(ctx, t, parent, observed, st)
}

func cloneOnce(clone, of map[string]any) map[string]any {
	if clone != nil {
		return clone
	}
	return maps.Clone(of)
}
