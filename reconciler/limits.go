package reconciler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

// BudgetRetry is when a parent refused over the evaluation budget
// (contract.ReasonEvaluationBudgetExceeded) is reconciled again: long
// enough for the evaluations that overran to end, short enough that a
// parent refused only for them catches up soon.
const BudgetRetry = 30 * time.Second

// FreshBudgetRetry is when a parent never seen to overrun, refused over the
// evaluation budget (render.RefusedFresh), is reconciled again: sooner,
// since most such parents are healthy ones refused only because runaways
// fill the budget, and a refusal costs no evaluation.
const FreshBudgetRetry = 5 * time.Second

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

// markOverran keeps the parent's contract.AnnotationEvaluationOverran in
// line with how its rendering ended (render.Budget): set to the template's
// hash and the parent's generation when the evaluation ran past the
// timeout, so that the engine, restarted or not, does not evaluate it again
// (it is a bound on what CUE, which cannot be interrupted, holds); removed
// once it names another template or generation. The write is a merge patch
// of the parent's metadata, nothing else: its event brings one more
// reconcile, which refuses without evaluating. The parent is updated in
// place, so that the status is written over its new version.
func (r *Reconciler) markOverran(ctx context.Context, t *templates.Template, parent *unstructured.Unstructured, renderErr error) error {
	have, annotated := parent.GetAnnotations()[contract.AnnotationEvaluationOverran]
	current := contract.EvaluationOverranValue(t.Hash, parent.GetGeneration())
	var value any // the annotation's new value; nil removes it
	re := (*render.Error)(nil)
	switch {
	case errors.As(renderErr, &re) && re.Reason == contract.ReasonEvaluationTimeout:
		if have == current {
			return nil
		}
		value = current
	case annotated && have != current:
	default:
		return nil
	}
	if err := r.writer.Patch(ctx, parent, overranPatch(value)); err != nil {
		return fmt.Errorf("recording on the parent that its evaluation ran past the timeout: %w", err)
	}
	return nil
}

// OverranPatch sets a parent's contract.AnnotationEvaluationOverran to
// value (contract.EvaluationOverranValue), and nothing else: how the
// engine records an evaluation past the timeout, here and when it exits at
// the hard heap bar (render.HeapExceeded).
func OverranPatch(value string) client.Patch { return overranPatch(value) }

// overranPatch is a merge patch of the annotation; nil value removes it.
func overranPatch(value any) client.Patch {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{contract.AnnotationEvaluationOverran: value}}}) // strings: cannot fail
	return client.RawPatch(types.MergePatchType, patch)
}
