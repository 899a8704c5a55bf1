package engine

import (
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates"
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
	graph *templates.Graph
}

// evaluate runs the template for the parent, within the limits
// (limits.go). An evaluation error, or a limit exceeded, is a terminal
// problem: nothing changes until the parent or the template does.
func (r *reconciler) evaluate(t *templates.Template, parent *unstructured.Unstructured, observed map[string]any, st *status) (*evaluation, error) {
	out, err := r.boundedEvaluate(t, parent, observed)
	if err != nil {
		return nil, st.templateFailed(err)
	}
	st.template.record(out.Status)
	return &evaluation{result: out, children: r.desiredChildren(t, parent, out, st), observed: observed, graph: t.Graph()}, nil
}

// reevaluate runs the template again when the resources step saw a
// resource appear, change or go, so a child that depends on it is applied
// (and the template's status written) from what is true now, in this same
// reconcile.
func (r *reconciler) reevaluate(t *templates.Template, parent *unstructured.Unstructured, eval *evaluation, st *status) (*evaluation, error) {
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
	return r.evaluate(t, parent, observed, st)
}

func cloneOnce(clone, of map[string]any) map[string]any {
	if clone != nil {
		return clone
	}
	return maps.Clone(of)
}

// desiredChildren turns the template's children into the objects to apply,
// enforcing the template's policy; a refused child is a terminal problem of
// its own and the others go on.
func (r *reconciler) desiredChildren(t *templates.Template, parent *unstructured.Unstructured, out *templates.Result, st *status) []*unstructured.Unstructured {
	desired := make([]*unstructured.Unstructured, 0, len(out.Children))
	for _, c := range out.Children {
		obj, err := Desired(parent, t.Policy, r.scoper, c)
		if err != nil {
			st.fail(contract.ReasonChildRefused, terminalError(contract.ReasonChildRefused, err))
			continue
		}
		desired = append(desired, obj)
	}
	// Namespaces first, then the rest in the template's order, as kubectl
	// and Helm do: a child in a namespace the template also creates can be
	// applied in the same reconcile.
	slices.SortStableFunc(desired, func(a, b *unstructured.Unstructured) int {
		return namespaceFirst(a) - namespaceFirst(b)
	})
	return desired
}

func namespaceFirst(obj *unstructured.Unstructured) int {
	if obj.GetKind() == "Namespace" {
		return 0
	}
	return 1
}
