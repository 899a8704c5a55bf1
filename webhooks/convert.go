package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cuengine/engine/evaluator"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

// PathConvert is where the apiserver sends the parents to convert between
// the versions of their kind (the CRD's spec.conversion.webhook).
const PathConvert = "/convert"

// caFile is the CA's key in the rotator's Secret.
const caFile = "ca.crt"

// converter answers ConversionReviews with the CUE of the templates'
// versions blocks: every object of a review converts, or the review fails
// as a whole, naming the object and the field; never a half-converted
// list.
type converter struct {
	lookup func(schema.GroupKind) (*templates.Template, bool)
	limits render.Limits
	gate   *gate           // its body bounded by gate.wrap, its evaluations by gate.kind
	pool   *evaluator.Pool // nil: in process
}

var _ http.Handler = (*converter)(nil)

func (c *converter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "a ConversionReview is POSTed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(r.Body) // bounded by gate.wrap
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			http.Error(w, fmt.Sprintf("the ConversionReview is more than the %d bytes the engine reads (--webhook-max-request-bytes)", tooLarge.Limit), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "reading the ConversionReview: cut short", http.StatusBadRequest)
		return
	}
	review := &apiextensionsv1.ConversionReview{}
	if err := json.Unmarshal(body, review); err != nil || review.Request == nil {
		http.Error(w, fmt.Sprintf("decoding the ConversionReview: %v", err), http.StatusBadRequest)
		return
	}
	body = nil
	releasePort(r.Context())
	resp := c.convert(r.Context(), review.Request)
	if resp.Result.Status == metav1.StatusFailure {
		ctrl.LoggerFrom(r.Context()).Info("conversion refused", "uid", review.Request.UID, "to", review.Request.DesiredAPIVersion, "message", resp.Result.Message)
	}
	out := apiextensionsv1.ConversionReview{TypeMeta: review.TypeMeta, Response: resp}
	if out.APIVersion == "" {
		out.APIVersion, out.Kind = apiextensionsv1.SchemeGroupVersion.String(), "ConversionReview"
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(out); err != nil {
		ctrl.LoggerFrom(r.Context()).Error(err, "writing the ConversionReview response")
	}
}

// convert converts every object of the request, or none.
func (c *converter) convert(ctx context.Context, req *apiextensionsv1.ConversionRequest) *apiextensionsv1.ConversionResponse {
	fail := func(format string, args ...any) *apiextensionsv1.ConversionResponse {
		return &apiextensionsv1.ConversionResponse{UID: req.UID, Result: metav1.Status{Status: metav1.StatusFailure, Message: fmt.Sprintf(format, args...)}}
	}
	to, err := schema.ParseGroupVersion(req.DesiredAPIVersion)
	if err != nil {
		return fail("desiredAPIVersion %q: %v", req.DesiredAPIVersion, err)
	}
	objs := make([]*unstructured.Unstructured, len(req.Objects))
	tmpls := make([]*templates.Template, len(req.Objects))
	for i, raw := range req.Objects {
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(raw.Raw); err != nil {
			return fail("decoding object %d: %v", i, err)
		}
		gk := obj.GroupVersionKind().GroupKind()
		if gk.Group != to.Group {
			return fail("%s: cannot convert to %s, another API group", describe(obj), req.DesiredAPIVersion)
		}
		t, ok := c.lookup(gk)
		if !ok {
			return fail("%s: no template serves %s (the engine has not loaded it, or it was removed)", describe(obj), gk)
		}
		objs[i], tmpls[i] = obj, t
	}
	converted := make([]runtime.RawExtension, 0, len(req.Objects))
	for i := 0; i < len(objs); {
		// A run of objects of one template and namespace, at most
		// batchSize, goes to an evaluator process in one request.
		j := i + 1
		for j < len(objs) && j-i < batchSize && tmpls[j] == tmpls[i] && objs[j].GetNamespace() == objs[i].GetNamespace() {
			j++
		}
		if c.pool != nil && j-i > 1 {
			raws := make([][]byte, j-i)
			for k := range raws {
				raws[k] = req.Objects[i+k].Raw
			}
			out, failed, err := c.convertBatch(ctx, tmpls[i], objs[i:j], raws, to.Version)
			if err == nil {
				for _, b := range out {
					converted = append(converted, runtime.RawExtension{Raw: b})
				}
				i = j
				continue
			}
			if !errors.Is(err, render.ErrNoProcessFree) {
				return fail("%s: %v", describe(objs[i+failed]), err)
			}
		}
		for ; i < j; i++ { // in the engine's process, one at a time
			b, err := c.convertOne(ctx, tmpls[i], objs[i], req.Objects[i].Raw, to.Version)
			if err != nil {
				return fail("%s: %v", describe(objs[i]), err)
			}
			converted = append(converted, runtime.RawExtension{Raw: b})
		}
	}
	return &apiextensionsv1.ConversionResponse{UID: req.UID, ConvertedObjects: converted, Result: metav1.Status{Status: metav1.StatusSuccess}}
}

// batchSize bounds the objects of a review sent to an evaluator process
// in one request, so that one review does not keep a process from the
// other kinds' requests for long.
const batchSize = 100

// convertBatch converts objs (one template's, one namespace's) in an
// evaluator process under one slot of their kind.
func (c *converter) convertBatch(ctx context.Context, t *templates.Template, objs []*unstructured.Unstructured, raws [][]byte, version string) ([][]byte, int, error) {
	ended, err := c.gate.kind(ctx, objs[0].GroupVersionKind().GroupKind())
	if err != nil {
		return nil, 0, err
	}
	out, failed, err := render.ConvertBatch(t, objs, raws, version, c.limits, c.pool, ended)
	if errors.Is(err, render.ErrNoProcessFree) {
		ended()
		return nil, 0, err
	}
	if err != nil {
		return nil, failed, errors.New(message(err))
	}
	return out, 0, nil
}

// convertOne converts obj (raw as received) to version under its kind's
// slot (and in the engine's process, a share of its CPUs), encoded.
func (c *converter) convertOne(ctx context.Context, t *templates.Template, obj *unstructured.Unstructured, raw []byte, version string) ([]byte, error) {
	ended, err := c.gate.kind(ctx, obj.GroupVersionKind().GroupKind())
	if err != nil {
		return nil, err
	}
	b, err := render.Convert(t, obj, raw, version, c.limits, c.pool, c.gate.shareOf(ctx), ended)
	if err != nil {
		return nil, errors.New(message(err))
	}
	return b, nil
}

// describe names an object in a failure: Kind namespace/name (version).
func describe(obj *unstructured.Unstructured) string {
	name := obj.GetName()
	if ns := obj.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	return obj.GetKind() + " " + name + " (" + obj.GetAPIVersion() + ")"
}

// message is a conversion's error, bounded to maxProblems problems.
func message(err error) string {
	var ce *templates.ConversionError
	if !errors.As(err, &ce) || len(ce.Problems) <= maxProblems {
		return err.Error()
	}
	short := *ce
	short.Problems = ce.Problems[:maxProblems]
	return short.Error() + fmt.Sprintf("; and %d more", len(ce.Problems)-maxProblems)
}

// conversionConfig is how the apiserver reaches /convert: the Service (or
// URL) of the admission webhook, and the CA of the serving certificate
// when the engine keeps it (the rotator keeps it current afterwards).
func (s *Server) conversionConfig() *apiextensionsv1.WebhookClientConfig {
	cc := &apiextensionsv1.WebhookClientConfig{}
	if s.opts.URL != "" {
		cc.URL = ptr(strings.TrimSuffix(s.opts.URL, "/") + PathConvert)
	} else {
		cc.Service = &apiextensionsv1.ServiceReference{Namespace: s.opts.Namespace, Name: s.opts.Service, Path: ptr(PathConvert), Port: ptr(int32(s.opts.ServicePort))}
	}
	return cc
}

func ptr[T any](x T) *T { return &x }

// needsConversion reports whether a template of the set has several
// versions, so its CRD names /convert.
func needsConversion(set *templates.Set) bool {
	for _, t := range set.Templates() {
		if t.Converts() {
			return true
		}
	}
	return false
}

// conversionCRDs are the CRDs whose conversion webhook's caBundle the
// rotator keeps: those of the set's kinds with several versions. A kind
// that gains versions later gets the CA when the engine installs its CRD
// (ConversionWebhook).
func conversionCRDs(set *templates.Set) []rotator.WebhookInfo {
	var out []rotator.WebhookInfo
	for _, t := range set.Templates() {
		if t.Converts() {
			out = append(out, rotator.WebhookInfo{Type: rotator.CRDConversion, Name: t.CRD().Name})
		}
	}
	return out
}

func (s *Server) lookupGroupKind(gk schema.GroupKind) (*templates.Template, bool) {
	set := s.set.Load()
	if set == nil {
		return nil, false
	}
	return set.LookupGroupKind(gk)
}

// ConversionWebhook is what the engine writes into the CRD of a kind with
// several versions: how the apiserver reaches /convert (the Service, or
// the URL under engine dev), the CA of the serving certificate as the
// Secret holds it (none yet before the rotator's first certificate: the
// rotator injects it then), and, under cert-manager, the cainjector's
// annotation in place of a CA.
func (s *Server) ConversionWebhook(ctx context.Context) (*apiextensionsv1.WebhookClientConfig, map[string]string, error) {
	cc := s.conversionConfig()
	if s.opts.CertManagerCertificate != "" {
		return cc, map[string]string{annotationInjectCA: s.opts.CertManagerCertificate}, nil
	}
	secret := &corev1.Secret{}
	err := s.direct.Get(ctx, types.NamespacedName{Namespace: s.opts.Namespace, Name: s.opts.SecretName}, secret)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, nil, fmt.Errorf("reading the webhook certificate Secret %s/%s: %w", s.opts.Namespace, s.opts.SecretName, err)
	default:
		cc.CABundle = secret.Data[caFile]
	}
	return cc, nil, nil
}
