package engine

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// The refusal itself, with its count, is tested on a real apiserver
// (cmd/engine TestRemovingAStoredVersionIsRefusedOnCluster).
func TestUnstoredVersions(t *testing.T) {
	live := &apiextensionsv1.CustomResourceDefinition{Status: apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: []string{"v1", "v2"}}}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v2", Storage: true}}
	assert.Equal(t, []string{"v1"}, unstored(live, crd))
	live.Status.StoredVersions = []string{"v2"}
	assert.Empty(t, unstored(live, crd))
}

func TestWithConversion(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	crd.Name = "apps.apps.example.com"
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1"}}}
	err := withConversion(context.Background(), crd.DeepCopy(), nil)
	assert.ErrorContains(t, err, "start the engine with --webhook-port")

	url := "https://localhost:9443/convert"
	conv := func(context.Context) (*apiextensionsv1.WebhookClientConfig, map[string]string, error) {
		return &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: []byte("ca")}, map[string]string{"a": "b"}, nil
	}
	require.NoError(t, withConversion(context.Background(), crd, conv))
	assert.Equal(t, url, *crd.Spec.Conversion.Webhook.ClientConfig.URL)
	assert.Equal(t, []byte("ca"), crd.Spec.Conversion.Webhook.ClientConfig.CABundle)
	assert.Equal(t, map[string]string{"a": "b"}, crd.Annotations)

	plain := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, withConversion(context.Background(), plain, nil), "one version: nothing to fill")
	assert.Nil(t, plain.Spec.Conversion)
}

func TestKeepCABundle(t *testing.T) {
	url := "https://localhost:9443/convert"
	withCA := func(ca string) *apiextensionsv1.CustomResourceDefinition {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{ClientConfig: &apiextensionsv1.WebhookClientConfig{URL: &url}}}
		if ca != "" {
			crd.Spec.Conversion.Webhook.ClientConfig.CABundle = []byte(ca)
		}
		return crd
	}
	crd := withCA("")
	keepCABundle(withCA("old"), crd)
	assert.Equal(t, []byte("old"), crd.Spec.Conversion.Webhook.ClientConfig.CABundle, "none to write: the live one stays")
	crd = withCA("new")
	keepCABundle(withCA("old"), crd)
	assert.Equal(t, []byte("new"), crd.Spec.Conversion.Webhook.ClientConfig.CABundle, "the Secret's CA wins")
	plain := &apiextensionsv1.CustomResourceDefinition{}
	keepCABundle(withCA("old"), plain)
	assert.Nil(t, plain.Spec.Conversion)
}
