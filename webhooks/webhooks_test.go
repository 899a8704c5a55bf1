package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

func loadSet(t *testing.T) *templates.Set {
	t.Helper()
	set, err := templates.Load("testdata/templates")
	require.NoError(t, err)
	return set
}

func request(t *testing.T, op admissionv1.Operation, kind string, obj map[string]any) admission.Request {
	t.Helper()
	raw, err := json.Marshal(obj)
	require.NoError(t, err)
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: op,
		Kind:      metav1.GroupVersionKind{Group: "test.cuengine.dev", Version: "v1", Kind: kind},
		Object:    runtime.RawExtension{Raw: raw},
	}}
}

func site(spec map[string]any) map[string]any {
	return map[string]any{
		"apiVersion": "test.cuengine.dev/v1", "kind": "Site",
		"metadata": map[string]any{"name": "web", "namespace": "apps"},
		"spec":     spec,
	}
}

func TestValidator(t *testing.T) {
	set := loadSet(t)
	v := &validator{lookup: set.LookupGroupKind, gate: newGate(Bounds{})}
	ctx := context.Background()

	t.Run("a spec that breaks a cross-field constraint is refused", func(t *testing.T) {
		resp := v.Handle(ctx, request(t, admissionv1.Create, "Site", site(map[string]any{"region": "eu", "minReplicas": 5, "replicas": 1})))
		assert.False(t, resp.Allowed)
		assert.Equal(t, int32(422), resp.Result.Code)
		assert.Equal(t, metav1.StatusReasonInvalid, resp.Result.Reason)
		assert.Equal(t, "template site.cue: site.cue:11:27: parent.spec.replicas: invalid value 1 (out of bound >=5)", resp.Result.Message)
		assert.Equal(t, []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueInvalid, Field: "spec.replicas", Message: "site.cue:11:27: invalid value 1 (out of bound >=5)"}}, resp.Result.Details.Causes)
	})
	t.Run("an update is checked too", func(t *testing.T) {
		resp := v.Handle(ctx, request(t, admissionv1.Update, "Site", site(map[string]any{"region": "eu", "minReplicas": 5, "replicas": 1})))
		assert.False(t, resp.Allowed)
	})
	t.Run("a valid spec is admitted", func(t *testing.T) {
		resp := v.Handle(ctx, request(t, admissionv1.Create, "Site", site(map[string]any{"region": "eu", "minReplicas": 2, "replicas": 3})))
		assert.True(t, resp.Allowed, resp.Result)
	})
	t.Run("an object being deleted is admitted", func(t *testing.T) {
		obj := site(map[string]any{"region": "eu", "minReplicas": 5, "replicas": 1})
		obj["metadata"].(map[string]any)["deletionTimestamp"] = "2026-01-01T00:00:00Z"
		resp := v.Handle(ctx, request(t, admissionv1.Update, "Site", obj))
		assert.True(t, resp.Allowed)
	})
	t.Run("a delete is never checked", func(t *testing.T) {
		resp := v.Handle(ctx, request(t, admissionv1.Delete, "Site", site(map[string]any{"replicas": 1, "minReplicas": 5})))
		assert.True(t, resp.Allowed)
	})
	t.Run("a kind whose template needs no webhook is admitted", func(t *testing.T) {
		resp := v.Handle(ctx, request(t, admissionv1.Create, "Plain", map[string]any{"spec": map[string]any{"replicas": 1}}))
		assert.True(t, resp.Allowed)
	})
}

func TestConfiguration(t *testing.T) {
	set := loadSet(t)
	opts := Options{
		Namespace: "engine-system", Service: "engine-webhook", ServicePort: 443,
		ConfigurationName: "engine.cuengine.dev", FailurePolicy: admissionregistrationv1.Fail, Timeout: 5 * time.Second,
	}
	vwc := opts.configuration(set)
	require.NotNil(t, vwc)
	require.Len(t, vwc.Webhooks, 1)
	hook := vwc.Webhooks[0]
	assert.Equal(t, "parents.engine.cuengine.dev", hook.Name)
	scope := admissionregistrationv1.NamespacedScope
	assert.Equal(t, []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"test.cuengine.dev"}, APIVersions: []string{"v1"}, Resources: []string{"sites"}, Scope: &scope},
	}}, hook.Rules, "only the kind whose template needs it, never its status")
	path, port := "/validate", int32(443)
	assert.Equal(t, admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "engine-system", Name: "engine-webhook", Path: &path, Port: &port}}, hook.ClientConfig)
	assert.Equal(t, admissionregistrationv1.Fail, *hook.FailurePolicy)
	assert.Equal(t, int32(5), *hook.TimeoutSeconds)
	assert.Equal(t, matchSpecWrites, hook.MatchConditions)
	assert.Empty(t, vwc.Annotations)

	t.Run("engine dev: a URL", func(t *testing.T) {
		local := opts
		local.URL = "https://localhost:9443"
		hook := local.configuration(set).Webhooks[0]
		require.NotNil(t, hook.ClientConfig.URL)
		assert.Equal(t, "https://localhost:9443/validate", *hook.ClientConfig.URL)
		assert.Nil(t, hook.ClientConfig.Service)
		dns, err := local.dnsName()
		require.NoError(t, err)
		assert.Equal(t, "localhost", dns)
	})
	t.Run("cert-manager injects the CA", func(t *testing.T) {
		cm := opts
		cm.CertManagerCertificate = "engine-system/engine-webhook"
		assert.Equal(t, map[string]string{"cert-manager.io/inject-ca-from": "engine-system/engine-webhook"}, cm.configuration(set).Annotations)
	})
	t.Run("no template needs it: no configuration", func(t *testing.T) {
		src, err := os.ReadFile("testdata/templates/plain.cue")
		require.NoError(t, err)
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "plain.cue"), src, 0o644))
		plain, err := templates.Load(dir)
		require.NoError(t, err)
		assert.Nil(t, opts.configuration(plain))
	})
	dns, err := opts.dnsName()
	require.NoError(t, err)
	assert.Equal(t, "engine-webhook.engine-system.svc", dns)
}

// TestBusyValidationFailsTheCall: a validation the engine has no room for
// (its kind's slots taken) fails the HTTP call with 429 and Retry-After,
// so that the apiserver retries it and then applies the failure policy;
// an object the templates refuse is still an AdmissionReview that denies.
func TestBusyValidationFailsTheCall(t *testing.T) {
	set := loadSet(t)
	g := newGate(Bounds{MaxPerKind: 1, MaxWaiting: 1, KindWait: 50 * time.Millisecond})
	h := g.wrap(failWhenBusy(&admission.Webhook{Handler: &validator{lookup: set.LookupGroupKind, gate: g}}))
	post := func(spec map[string]any) *httptest.ResponseRecorder {
		req := request(t, admissionv1.Create, "Site", site(spec))
		req.UID = "u-1"
		body, err := json.Marshal(admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request:  &req.AdmissionRequest,
		})
		require.NoError(t, err)
		r := httptest.NewRequest(http.MethodPost, PathValidate, bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec
	}
	refused := post(map[string]any{"region": "eu", "minReplicas": 5, "replicas": 1})
	require.Equal(t, http.StatusOK, refused.Code)
	var review admissionv1.AdmissionReview
	require.NoError(t, json.Unmarshal(refused.Body.Bytes(), &review))
	assert.False(t, review.Response.Allowed)
	assert.Equal(t, int32(422), review.Response.Result.Code)

	held, err := g.kind(context.Background(), schema.GroupKind{Group: "test.cuengine.dev", Kind: "Site"})
	require.NoError(t, err)
	busy := post(map[string]any{"region": "eu", "minReplicas": 2, "replicas": 3})
	assert.Equal(t, http.StatusTooManyRequests, busy.Code)
	assert.Equal(t, "1", busy.Header().Get("Retry-After"))
	assert.Equal(t, "the engine's webhook is busy with Site.test.cuengine.dev: 1 of its evaluations are running (--webhook-max-per-kind), some perhaps past --evaluation-timeout, and more wait\n", busy.Body.String())
	held()

	admitted := post(map[string]any{"region": "eu", "minReplicas": 2, "replicas": 3})
	require.Equal(t, http.StatusOK, admitted.Code)
	require.NoError(t, json.Unmarshal(admitted.Body.Bytes(), &review))
	assert.True(t, review.Response.Allowed)
	assert.Equal(t, "u-1", string(review.Response.UID))
}

// TestValidatorConvertsToTheHub: a kind with several versions gets the
// webhook, with a rule for each served version and matchPolicy Exact; a
// write in v1 is converted to the hub by the engine, refused when it does
// not convert, naming the field and the template's line, and admitted when
// it does, whatever the object it replaces (a stored object that does not
// convert can be fixed).
func TestValidatorConvertsToTheHub(t *testing.T) {
	set, err := templates.Load("../cmd/engine/testdata/conversion") // hub v2 bounds replicas to 10, v1 does not
	require.NoError(t, err)
	v := &validator{lookup: set.LookupGroupKind, limits: render.Limits{EvaluationTimeout: 5 * time.Second}, gate: newGate(Bounds{})}
	app := func(replicas int) admission.Request {
		raw, err := json.Marshal(map[string]any{
			"apiVersion": "apps.example.com/v1", "kind": "App",
			"metadata": map[string]any{"name": "big", "namespace": "apps"},
			"spec":     map[string]any{"image": "nginx", "replicas": replicas},
		})
		require.NoError(t, err)
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Update,
			Kind:      metav1.GroupVersionKind{Group: "apps.example.com", Version: "v1", Kind: "App"},
			Object:    runtime.RawExtension{Raw: raw},
			OldObject: runtime.RawExtension{Raw: []byte(`{"apiVersion":"apps.example.com/v1","kind":"App","metadata":{"name":"big","namespace":"apps"},"spec":{"image":"nginx","replicas":20}}`)},
		}}
	}
	resp := v.Handle(context.Background(), app(20))
	assert.False(t, resp.Allowed)
	assert.Equal(t, int32(422), resp.Result.Code)
	assert.Equal(t, "App apps/big (apps.example.com/v1): converting v1 to v2: app.cue:18:30: spec.container.replicas: invalid value 20 (out of bound <=10)", resp.Result.Message)
	resp = v.Handle(context.Background(), app(5))
	assert.True(t, resp.Allowed, "the fix of an object that does not convert: %v", resp.Result)

	opts := Options{Namespace: "engine-system", Service: "engine-webhook", ServicePort: 443, ConfigurationName: "engine.cuengine.dev", FailurePolicy: admissionregistrationv1.Fail, Timeout: 5 * time.Second}
	vwc := opts.configuration(set)
	require.NotNil(t, vwc, "a kind with versions needs the webhook")
	hook := vwc.Webhooks[0]
	require.Len(t, hook.Rules, 1)
	assert.Equal(t, []string{"v2", "v1"}, hook.Rules[0].APIVersions)
	assert.Equal(t, admissionregistrationv1.Exact, *hook.MatchPolicy)
}
