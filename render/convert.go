package render

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/evaluator"
	"github.com/cuengine/engine/templates"
)

// Convert returns obj in version to of its kind (templates.Template.Convert)
// within the limits an evaluation has: the evaluation timeout, and the
// rendered size for the converted object. It is the conversion webhook's
// one door to a template, so a parent cannot cost the engine more by being
// read in another version than by being reconciled. ended, when not nil,
// runs once the CUE work has ended: at once, or when a conversion that
// ran past the timeout finally does (the webhook holds a slot until then).
// With a pool, a template that may run away (Template.MayRunAway) converts
// in an evaluator process, stopped at the timeout, as it evaluates.
func Convert(t *templates.Template, obj *unstructured.Unstructured, to string, limits Limits, pool *evaluator.Pool, ended func()) (*unstructured.Unstructured, error) {
	limits = limits.WithDefaults()
	if pool != nil && t.MayRunAway() {
		if ended != nil {
			defer ended()
		}
		out, err := isolated(limits, func(ctx context.Context) (*unstructured.Unstructured, error) {
			return pool.Convert(ctx, poolKey(obj), limits.EvaluationTimeout, t, obj, to)
		})
		if err != nil {
			return nil, err
		}
		if err := limits.checkConverted(out, to); err != nil {
			return nil, err
		}
		return out, nil
	}
	out, err := within(limits.EvaluationTimeout, nil, func() (*unstructured.Unstructured, error) {
		if ended != nil {
			defer ended()
		}
		return t.Convert(obj, to)
	})
	var re *Error
	if errors.As(err, &re) && re.Reason == contract.ReasonEvaluationTimeout {
		return nil, &Error{Reason: re.Reason, Err: fmt.Errorf("the conversion to %s took longer than %s (--evaluation-timeout)", to, limits.EvaluationTimeout)}
	}
	if err != nil {
		return nil, err
	}
	if err := limits.checkConverted(out, to); err != nil {
		return nil, err
	}
	return out, nil
}

// checkConverted refuses a conversion over --max-rendered-bytes.
func (l Limits) checkConverted(out *unstructured.Unstructured, to string) error {
	if l.MaxRenderedBytes <= 0 {
		return nil
	}
	b, err := json.Marshal(out.Object)
	if err != nil {
		return err
	}
	if len(b) > l.MaxRenderedBytes {
		return &Error{Reason: contract.ReasonRenderTooLarge, Err: fmt.Errorf(
			"the conversion to %s gives %d bytes, more than the %d allowed (--max-rendered-bytes)", to, len(b), l.MaxRenderedBytes)}
	}
	return nil
}

// ValidateParent checks obj against its template's schema
// (templates.Template.ValidateParent) within the evaluation timeout: the
// admission webhook's door, bounded as Convert is; ended as Convert's.
func ValidateParent(t *templates.Template, obj *unstructured.Unstructured, limits Limits, pool *evaluator.Pool, ended func()) error {
	limits = limits.WithDefaults()
	if pool != nil && t.MayRunAway() {
		if ended != nil {
			defer ended()
		}
		_, err := isolated(limits, func(ctx context.Context) (struct{}, error) {
			return struct{}{}, pool.ValidateParent(ctx, poolKey(obj), limits.EvaluationTimeout, t, obj)
		})
		return err
	}
	_, err := within(limits.EvaluationTimeout, nil, func() (struct{}, error) {
		if ended != nil {
			defer ended()
		}
		return struct{}{}, t.ValidateParent(obj)
	})
	var re *Error
	if errors.As(err, &re) && re.Reason == contract.ReasonEvaluationTimeout {
		return &Error{Reason: re.Reason, Err: fmt.Errorf("validating the object took longer than %s (--evaluation-timeout)", limits.EvaluationTimeout)}
	}
	return err
}
