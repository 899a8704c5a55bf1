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
// read in another version than by being reconciled.
func Convert(t *templates.Template, obj *unstructured.Unstructured, to string, limits Limits) (*unstructured.Unstructured, error) {
	limits = limits.WithDefaults()
	out, err := within(limits.EvaluationTimeout, nil, func() (*unstructured.Unstructured, error) { return t.Convert(obj, to) })
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
