package engine

import (
	"context"
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// ConversionWebhook returns the clientConfig of the engine's conversion
// webhook (the webhook server's /convert) and the annotations the CRD
// needs with it (cert-manager's CA injection).
type ConversionWebhook func(context.Context) (*apiextensionsv1.WebhookClientConfig, map[string]string, error)

// withConversion completes the conversion of a CRD with several versions:
// the template gives strategy Webhook, and where the apiserver reaches the
// webhook depends on how the engine runs. Without a webhook server the CRD
// is refused: the apiserver could serve no version but the stored one.
func withConversion(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, conv ConversionWebhook) error {
	c := crd.Spec.Conversion
	if c == nil || c.Strategy != apiextensionsv1.WebhookConverter || c.Webhook == nil {
		return nil
	}
	if conv == nil {
		return fmt.Errorf("CRD %s not installed: its kind has several versions, which the apiserver converts through the engine's webhook; start the engine with --webhook-port (the chart and config/ do, and so does engine dev)", crd.Name)
	}
	cc, annotations, err := conv(ctx)
	if err != nil {
		return fmt.Errorf("CRD %s: the conversion webhook: %w", crd.Name, err)
	}
	c.Webhook.ClientConfig = cc
	for k, v := range annotations {
		if crd.Annotations == nil {
			crd.Annotations = map[string]string{}
		}
		crd.Annotations[k] = v
	}
	return nil
}

// stillStored refuses a CRD without a version that objects are still
// stored in (the live CRD's status.storedVersions), even when forced: the
// apiserver would refuse it too, less clearly. The engine migrates those
// objects first (migrate.go).
func stillStored(live, crd *apiextensionsv1.CustomResourceDefinition) error {
	declared := map[string]bool{}
	for _, v := range crd.Spec.Versions {
		declared[v.Name] = true
	}
	var missing []string
	for _, v := range live.Status.StoredVersions {
		if !declared[v] {
			missing = append(missing, v)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("CRD %s not updated: objects are still stored in %s (status.storedVersions %s), which the template no longer declares; keep it declared until the engine has migrated them (the CRD's StorageMigrated event)",
		crd.Name, strings.Join(missing, ", "), strings.Join(live.Status.StoredVersions, ", "))
}

// keepCABundle keeps the live CRD's caBundle when the engine has none to
// write (its Secret emptied for a rotation, the rotator not done yet):
// applying without it would remove it, and the apiserver could not call
// the webhook until the rotator injects the new one.
func keepCABundle(live, crd *apiextensionsv1.CustomResourceDefinition) {
	c, l := crd.Spec.Conversion, live.Spec.Conversion
	if c == nil || c.Webhook == nil || c.Webhook.ClientConfig == nil || len(c.Webhook.ClientConfig.CABundle) > 0 {
		return
	}
	if l != nil && l.Webhook != nil && l.Webhook.ClientConfig != nil {
		c.Webhook.ClientConfig.CABundle = l.Webhook.ClientConfig.CABundle
	}
}
