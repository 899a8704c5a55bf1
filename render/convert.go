package render

import (
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates"
)

// Convert returns obj in version to of its kind (templates.Template.Convert)
// within the limits an evaluation has: the evaluation timeout, and the
// rendered size for the converted object. It is the conversion webhook's
// one door to a template, so a parent cannot cost the engine more by being
// read in another version than by being reconciled. ended, when not nil,
// runs once the CUE work has ended: at once, or when a conversion that
// ran past the timeout finally does (the webhook holds a slot until then).
func Convert(t *templates.Template, obj *unstructured.Unstructured, to string, limits Limits, ended func()) (*unstructured.Unstructured, error) {
	limits = limits.WithDefaults()
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
	if limits.MaxRenderedBytes > 0 {
		b, err := json.Marshal(out.Object)
		if err != nil {
			return nil, err
		}
		if len(b) > limits.MaxRenderedBytes {
			return nil, &Error{Reason: contract.ReasonRenderTooLarge, Err: fmt.Errorf(
				"the conversion to %s gives %d bytes, more than the %d allowed (--max-rendered-bytes)", to, len(b), limits.MaxRenderedBytes)}
		}
	}
	return out, nil
}

// ValidateParent checks obj against its template's schema
// (templates.Template.ValidateParent) within the evaluation timeout: the
// admission webhook's door, bounded as Convert is; ended as Convert's.
func ValidateParent(t *templates.Template, obj *unstructured.Unstructured, limits Limits, ended func()) error {
	limits = limits.WithDefaults()
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
