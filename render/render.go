package render

import (
	"errors"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates"
	"github.com/cuengine/engine/templates/policy"
)

// Options are what a rendering is bound by and resolves scopes with.
type Options struct {
	// Limits bound the evaluation; zero fields take DefaultLimits.
	Limits Limits
	// Scoper tells namespaced kinds from cluster-scoped ones; nil is
	// OfflineScoper.
	Scoper Scoper
	// Bound, when set, is the newest template's policy: the children of
	// an older revision a parent is pinned to go only where both policies
	// allow (policy.Policy.Within).
	Bound *policy.Policy
	// Budget is the memory of the objects whose inputs went over a limit
	// and the cap on what evaluations past the timeout hold, shared by
	// every path that renders (budget.go); nil remembers nothing.
	Budget *Budget
}

// Rendered is what a template makes of one parent, as the engine applies it.
type Rendered struct {
	// Result is the template's output: children, resources, status.
	Result *templates.Result
	// Children are the objects to apply: the template's children with the
	// engine's labels and owner reference, the policy enforced, namespaces
	// first.
	Children []*unstructured.Unstructured
	// Refused are the children the policy refused, each an *Error of
	// reason contract.ReasonChildRefused wrapping a *ChildError; the others
	// are in Children.
	Refused []error
}

// Render is the one door from a template and a parent to the desired
// children: the reconcile, the rollout's hold check, `engine diff`, `diff
// --revision`, `render` and `test` all come through it, so each is bound
// by the same limits and refuses the same children. An evaluation error or
// a limit exceeded is an error; a refused child is not (Rendered.Refused).
// A limit exceeded is an *Error whose Reason names the limit
// (contract.ReasonEvaluationTimeout, ReasonTooManyChildren,
// ReasonRenderTooLarge); an evaluation error is the template's own
// (templates.Error and the like), never an *Error.
//
// With a Budget, inputs that went over a limit before are refused at once
// with the same error, and an object whose evaluation ran past the timeout
// before may be refused over the budget (contract.ReasonEvaluationBudgetExceeded),
// both without evaluating.
func Render(t *templates.Template, parent *unstructured.Unstructured, observed map[string]any, opts Options) (*Rendered, error) {
	call := opts.Budget.call(t, parent)
	var out *templates.Result
	var err error
	if pool := call.isolation(t); pool != nil {
		out, err = evaluateIsolated(pool, t, parent, observed, opts.Limits.WithDefaults(), call) // isolated.go
	} else if err = call.admit(); errors.Is(err, errOverflow) {
		out, err = evaluateIsolated(call.b.pool, t, parent, observed, opts.Limits.WithDefaults(), call) // isolated.go
	} else if err != nil {
		return nil, err
	} else {
		out, err = evaluate(t, parent, observed, opts.Limits.WithDefaults(), call)
		call.done(err)
	}
	if err != nil {
		return nil, err
	}
	scoper := opts.Scoper
	if scoper == nil {
		scoper = OfflineScoper{}
	}
	r := &Rendered{Result: out, Children: make([]*unstructured.Unstructured, 0, len(out.Children))}
	pol := t.Policy
	if opts.Bound != nil {
		pol = t.Policy.Within(*opts.Bound)
	}
	for _, c := range out.Children {
		obj, err := Desired(parent, pol, scoper, c)
		if err != nil {
			if opts.Bound != nil {
				err = bounded(parent, t, scoper, c, err)
			}
			r.Refused = append(r.Refused, &Error{Reason: contract.ReasonChildRefused, Err: err})
			continue
		}
		r.Children = append(r.Children, obj)
	}
	// Namespaces first, then the rest in the template's order, as kubectl
	// and Helm do: a child in a namespace the template also creates can be
	// applied in the same reconcile.
	slices.SortStableFunc(r.Children, func(a, b *unstructured.Unstructured) int {
		return namespaceFirst(a) - namespaceFirst(b)
	})
	return r, nil
}

// bounded says why a child that the revision's own policy allows is
// refused: the newest template's policy bounds every revision.
func bounded(parent *unstructured.Unstructured, t *templates.Template, scoper Scoper, c templates.Child, refused error) error {
	if _, err := Desired(parent, t.Policy, scoper, c); err != nil {
		return refused // refused by the revision's own policy too
	}
	ce := (*ChildError)(nil)
	if !errors.As(refused, &ce) {
		return refused
	}
	return &ChildError{Child: ce.Child, Msg: ce.Msg + "; the revision this object runs allowed it, but no revision may go beyond the newest template's policy"}
}

// evaluate evaluates within the limits.
func evaluate(t *templates.Template, parent *unstructured.Unstructured, observed map[string]any, limits Limits, call *budgetCall) (*templates.Result, error) {
	out, err := evaluateWithin(t, templates.Input{Parent: parent, Observed: observed}, limits.EvaluationTimeout, call)
	if err != nil {
		return nil, err
	}
	if err := limits.checkResult(out); err != nil {
		return nil, err
	}
	return out, nil
}

func namespaceFirst(obj *unstructured.Unstructured) int {
	if obj.GetKind() == "Namespace" {
		return 0
	}
	return 1
}
