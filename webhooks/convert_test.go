package webhooks

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

func appObject(t *testing.T, name string, spec map[string]any) runtime.RawExtension {
	t.Helper()
	raw, err := json.Marshal(map[string]any{
		"apiVersion": "apps.example.com/v1", "kind": "App",
		"metadata": map[string]any{"name": name, "namespace": "apps", "uid": "u-" + name},
		"spec":     spec,
	})
	require.NoError(t, err)
	return runtime.RawExtension{Raw: raw}
}

// review POSTs a ConversionReview to the handler and decodes the answer.
func review(t *testing.T, h http.Handler, to string, objs ...runtime.RawExtension) *apiextensionsv1.ConversionResponse {
	t.Helper()
	body, err := json.Marshal(apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
		Request:  &apiextensionsv1.ConversionRequest{UID: types.UID("r-1"), DesiredAPIVersion: to, Objects: objs},
	})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, PathConvert, bytes.NewReader(body)))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var out apiextensionsv1.ConversionReview
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
	assert.Equal(t, "ConversionReview", out.Kind)
	require.NotNil(t, out.Response)
	assert.Equal(t, types.UID("r-1"), out.Response.UID)
	return out.Response
}

func TestConverter(t *testing.T) {
	set, err := templates.Load("../examples/versions/templates")
	require.NoError(t, err)
	g := newGate(Bounds{})
	h := g.wrap(&converter{lookup: set.LookupGroupKind, limits: render.Limits{EvaluationTimeout: 5 * time.Second}, gate: g})

	t.Run("every object converts", func(t *testing.T) {
		resp := review(t, h, "apps.example.com/v2",
			appObject(t, "a", map[string]any{"image": "nginx", "replicas": 2}),
			appObject(t, "b", map[string]any{"image": "redis"}))
		require.Equal(t, metav1.StatusSuccess, resp.Result.Status, resp.Result.Message)
		require.Len(t, resp.ConvertedObjects, 2)
		var b map[string]any
		require.NoError(t, json.Unmarshal(resp.ConvertedObjects[1].Raw, &b))
		assert.Equal(t, "apps.example.com/v2", b["apiVersion"])
		assert.Equal(t, map[string]any{"container": map[string]any{"image": "redis", "replicas": 1.0}}, b["spec"])
		assert.Equal(t, "u-b", b["metadata"].(map[string]any)["uid"])
	})
	t.Run("one object that does not convert fails the review, naming it and the field", func(t *testing.T) {
		resp := review(t, h, "apps.example.com/v2",
			appObject(t, "a", map[string]any{"image": "nginx"}),
			appObject(t, "bad", map[string]any{"image": 5}))
		assert.Equal(t, metav1.StatusFailure, resp.Result.Status)
		assert.Empty(t, resp.ConvertedObjects, "never half a list")
		assert.Equal(t, "App apps/bad (apps.example.com/v1): converting v1 to v2: app.cue:25:14: spec.image: conflicting values string and 5 (mismatched types string and int)", resp.Result.Message)
	})
	t.Run("a kind no template serves", func(t *testing.T) {
		raw := runtime.RawExtension{Raw: []byte(`{"apiVersion":"other.example.com/v1","kind":"Thing","metadata":{"name":"x"}}`)}
		resp := review(t, h, "other.example.com/v2", raw)
		assert.Equal(t, metav1.StatusFailure, resp.Result.Status)
		assert.Equal(t, "Thing x (other.example.com/v1): no template serves Thing.other.example.com (the engine has not loaded it, or it was removed)", resp.Result.Message)
	})
	t.Run("with every share of the CPUs taken, the object waits its turn, then fails the review and gives its kind's slot back", func(t *testing.T) {
		g := newGate(Bounds{MaxEvaluating: 1, MaxPerKind: 1, KindWait: 100 * time.Millisecond})
		h := g.wrap(&converter{lookup: set.LookupGroupKind, limits: render.Limits{EvaluationTimeout: 5 * time.Second}, gate: g})
		held, err := g.share(t.Context()) // another kind's evaluation
		require.NoError(t, err)
		resp := review(t, h, "apps.example.com/v2", appObject(t, "a", map[string]any{"image": "nginx"}))
		assert.Equal(t, metav1.StatusFailure, resp.Result.Status)
		assert.Equal(t, "App apps/a (apps.example.com/v1): the engine's webhook is busy: 1 evaluations are running, the most it runs at once (--webhook-max-evaluating), and others wait", resp.Result.Message)
		held()
		resp = review(t, h, "apps.example.com/v2", appObject(t, "a", map[string]any{"image": "nginx"}))
		assert.Equal(t, metav1.StatusSuccess, resp.Result.Status, "the kind's one slot was given back: %s", resp.Result.Message)
		again, err := g.share(t.Context())
		require.NoError(t, err, "the share was given back once converted")
		again()
	})
	t.Run("a request that is not a ConversionReview", func(t *testing.T) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, PathConvert, bytes.NewReader([]byte(`{}`))))
		assert.Equal(t, http.StatusBadRequest, rec.Code)
	})
}

func TestConversionConfig(t *testing.T) {
	s := &Server{opts: Options{Namespace: "engine-system", Service: "engine-webhook", ServicePort: 443}}
	path, port := "/convert", int32(443)
	assert.Equal(t, &apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{Namespace: "engine-system", Name: "engine-webhook", Path: &path, Port: &port}}, s.conversionConfig())
	s.opts.URL = "https://localhost:9443/"
	assert.Equal(t, "https://localhost:9443/convert", *s.conversionConfig().URL)
	set, err := templates.Load("../examples/versions/templates")
	require.NoError(t, err)
	assert.True(t, needsConversion(set))
	assert.Equal(t, "apps.apps.example.com", conversionCRDs(set)[0].Name)
	assert.False(t, needsConversion(loadSet(t)))
}
