package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/cuengine/engine/evaluator"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

// PathValidate is where the apiserver sends the parents to validate.
const PathValidate = "/validate"

// maxProblems bounds the problems a refusal lists.
const maxProblems = 10

// templateLookup is the current set's template for a parent kind.
type templateLookup func(gvk schema.GroupVersionKind) (*templates.Template, bool)

// validator refuses a created or updated parent that breaks its
// template's CUE schema.
type validator struct {
	lookup templateLookup
	limits render.Limits
	gate   *gate
	pool   *evaluator.Pool // nil: in process
}

var _ admission.Handler = (*validator)(nil)

func (v *validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	releasePort(ctx) // decoded
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	gvk := schema.GroupVersionKind{Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind}
	t, ok := v.lookup(gvk)
	if !ok || !t.NeedsAdmission() {
		// A kind whose template is gone or no longer needs the webhook:
		// the configuration is about to lose its rule.
		return admission.Allowed("")
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(req.Object.Raw); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the %s: %w", gvk.Kind, err))
	}
	if obj.GetDeletionTimestamp() != nil {
		return admission.Allowed("") // being deleted: nothing to keep out
	}
	ended, err := v.gate.kind(ctx, gvk.GroupKind())
	if err != nil {
		return admission.Errored(http.StatusTooManyRequests, err)
	}
	err = render.ValidateParent(t, obj, v.limits, v.pool, ended)
	if err == nil {
		return admission.Allowed("")
	}
	return refusal(t, err)
}

// refusal is the answer kubectl prints: each problem as the CUE error
// reads (file:line:col: parent.spec.x: message), the fields as causes.
func refusal(t *templates.Template, err error) admission.Response {
	var te *templates.Error
	if !errors.As(err, &te) {
		return admission.Denied(fmt.Sprintf("template %s: %v", t.Path, err))
	}
	var causes []metav1.StatusCause
	for i, p := range te.Problems {
		if i == maxProblems {
			break
		}
		causes = append(causes, metav1.StatusCause{
			Type:    metav1.CauseTypeFieldValueInvalid,
			Field:   strings.TrimPrefix(p.Path, "parent."),
			Message: strings.TrimPrefix(p.Pos+": "+p.Msg, ": "),
		})
	}
	resp := admission.Denied(fmt.Sprintf("template %s: %s", t.Path, te.Summary(maxProblems)))
	resp.Result.Code = http.StatusUnprocessableEntity
	resp.Result.Reason = metav1.StatusReasonInvalid
	resp.Result.Details = &metav1.StatusDetails{Causes: causes}
	return resp
}
