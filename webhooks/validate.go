package webhooks

import (
	"bytes"
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

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/evaluator"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

// PathValidate is where the apiserver sends the parents to validate.
const PathValidate = "/validate"

// maxProblems bounds the problems a refusal lists.
const maxProblems = 10

// groupKindLookup is the current set's template for a parent kind, in
// whichever version it is written.
type groupKindLookup func(gk schema.GroupKind) (*templates.Template, bool)

// validator refuses a created or updated parent that breaks its
// template's CUE schema, or, written in another version than the hub,
// does not convert to the hub.
type validator struct {
	lookup groupKindLookup
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
	t, ok := v.lookup(gvk.GroupKind())
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
	if gvk.Version != t.GVK.Version {
		hub, resp, ok := v.toHub(ctx, t, obj, req.Object.Raw)
		if !ok {
			return resp
		}
		obj = hub
	}
	ended, err := v.gate.kind(ctx, gvk.GroupKind())
	if err != nil {
		return busy(ctx, err)
	}
	err = render.ValidateParent(t, obj, v.limits, v.pool, v.gate.shareOf(ctx), ended)
	if err == nil {
		return admission.Allowed("")
	}
	if noRoom(err) {
		return busy(ctx, err) // nothing was said of the object
	}
	return refusal(t, err)
}

// toHub converts obj, written in another version than the hub, to the
// hub, as the engine's /convert would: an object that does not convert is
// refused here, at its write, so that it is never stored to fail every
// list of its kind in the hub (the engine reads the kind in its storage
// version and converts itself: engine/storedversion.go, but every other
// client lists in the hub). The webhook's rule names each served version
// with matchPolicy Exact: with Equivalent the apiserver would convert the
// stored old object too before calling, so that an object stored before
// the rule (or while the webhook was down) could not be fixed, nor its
// finalizer removed, in any version.
func (v *validator) toHub(ctx context.Context, t *templates.Template, obj *unstructured.Unstructured, raw []byte) (*unstructured.Unstructured, admission.Response, bool) {
	ended, err := v.gate.kind(ctx, t.GVK.GroupKind())
	if err != nil {
		return nil, busy(ctx, err), false
	}
	b, err := render.Convert(t, obj, raw, t.GVK.Version, v.limits, v.pool, v.gate.shareOf(ctx), ended)
	if err != nil {
		if noRoom(err) {
			return nil, busy(ctx, err), false
		}
		resp := admission.Denied(fmt.Sprintf("%s: %s", describe(obj), message(err)))
		resp.Result.Code = http.StatusUnprocessableEntity
		resp.Result.Reason = metav1.StatusReasonInvalid
		return nil, resp, false
	}
	hub := &unstructured.Unstructured{}
	if err := hub.UnmarshalJSON(b); err != nil {
		return nil, admission.Errored(http.StatusInternalServerError, fmt.Errorf("decoding the converted %s: %w", t.GVK.Kind, err)), false
	}
	return hub, admission.Response{}, true
}

// noRoom reports whether err says the engine had no room to evaluate: its
// kind's slots or its share of the CPUs taken (a *busyError), or no
// evaluator process free in time.
func noRoom(err error) bool {
	var be *busyError
	var re *render.Error
	return errors.As(err, &be) || errors.As(err, &re) && re.Reason == contract.ReasonEvaluationBudgetExceeded
}

// busyKey carries, in a validation's context, where Handle says that the
// engine had no room to check the object (failWhenBusy).
type busyKey struct{}

// busy is the answer to a validation the engine had no room for: it
// records err for failWhenBusy, which fails the call; without it, a
// refusal with code 429.
func busy(ctx context.Context, err error) admission.Response {
	if p, ok := ctx.Value(busyKey{}).(*error); ok {
		*p = err
	}
	return admission.Errored(http.StatusTooManyRequests, err)
}

// failWhenBusy serves the admission webhook h, but fails with 429 and
// Retry-After the call of a validation the engine had no room for (its
// kind's slots, its share of the CPUs, an evaluator process), as the
// port's own refusals do: the apiserver retries it, then applies the
// webhook's failurePolicy, as for an engine that does not answer. An
// answer, even "not allowed, 429", would refuse the write whatever the
// policy, for a reason that is not the object's.
func failWhenBusy(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var refused error
		buf := &bufferedResponse{header: http.Header{}, code: http.StatusOK}
		h.ServeHTTP(buf, r.WithContext(context.WithValue(r.Context(), busyKey{}, &refused)))
		if refused != nil {
			w.Header().Set("Retry-After", "1")
			http.Error(w, refused.Error(), http.StatusTooManyRequests)
			return
		}
		for k, v := range buf.header {
			w.Header()[k] = v
		}
		w.WriteHeader(buf.code)
		_, _ = w.Write(buf.body.Bytes())
	})
}

// bufferedResponse holds a response (an AdmissionReview: small) until
// failWhenBusy knows whether to send it.
type bufferedResponse struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header         { return b.header }
func (b *bufferedResponse) WriteHeader(code int)        { b.code = code }
func (b *bufferedResponse) Write(p []byte) (int, error) { return b.body.Write(p) }

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
