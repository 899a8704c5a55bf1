package reconciler

import (
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

// BudgetRetry is when a parent refused over the evaluation budget
// (contract.ReasonEvaluationBudgetExceeded) is reconciled again: long
// enough for the evaluations that overran to end, short enough that a
// parent refused only for them catches up soon.
const BudgetRetry = 30 * time.Second

// boundedRender renders the template for the parent (render.Render, within
// the limits and the engine's budget). Inputs that went over a limit
// before, on this path or another, are refused at once with the same
// error, without evaluating.
func (r *Reconciler) boundedRender(t *templates.Template, parent *unstructured.Unstructured, observed map[string]any) (*render.Rendered, error) {
	start := time.Now()
	out, err := render.Render(t, parent, observed, render.Options{Limits: r.limits, Scoper: r.scoper, Bound: r.bound(t, parent), Budget: r.budget})
	if render.Unevaluated(err) {
		return nil, err
	}
	metricEvaluateSeconds.WithLabelValues(contract.KindString(t.GVK)).Observe(time.Since(start).Seconds())
	if err == nil && out.Result.Remembered {
		metricEvaluationsRemembered.WithLabelValues(contract.KindString(t.GVK)).Inc()
	}
	if err != nil {
		// A *render.Error from Render is a limit exceeded; an
		// evaluation error (the template's or the spec's) is not one.
		if re := (*render.Error)(nil); errors.As(err, &re) {
			metricLimitExceeded.WithLabelValues(contract.KindString(t.GVK), re.Reason).Inc()
		}
		return nil, err
	}
	return out, nil
}
