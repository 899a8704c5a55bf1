package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// unstored are the versions of the live CRD's status.storedVersions
// that crd no longer declares.
func unstored(live, crd *apiextensionsv1.CustomResourceDefinition) []string {
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
	return missing
}

// MigrationNotes says what the engine knows of its last storage
// migration of the CRD named crd ("" when it has run none).
type MigrationNotes func(crd string) string

// stillStored refuses a CRD without a version that objects may still be
// stored in (the live CRD's status.storedVersions), even when forced: the
// apiserver would refuse it too, less clearly. The refusal names how many
// objects of the kind exist (the apiserver does not say which version
// each is stored in, so any of them may be in a missing one) and where
// the migration stands. The engine migrates those objects first
// (migrate.go).
func stillStored(ctx context.Context, r client.Reader, live, crd *apiextensionsv1.CustomResourceDefinition, notes MigrationNotes) error {
	missing := unstored(live, crd)
	if len(missing) == 0 {
		return nil
	}
	kind := live.Spec.Names.Kind
	var count string
	switch n, err := countObjects(ctx, r, live, missing); {
	case err != nil:
		count = fmt.Sprintf("the %s objects could not be counted: %v", kind, err)
	case n == 0:
		count = fmt.Sprintf("no %s exists, and the engine's next migration trims status.storedVersions", kind)
	case n == 1:
		count = fmt.Sprintf("1 %s exists, which may be stored there", kind)
	default:
		count = fmt.Sprintf("%d %s objects exist, any of which may be stored there", n, kind)
	}
	migration := "the engine has not migrated them since it started"
	if storage := storageVersion(live); slices.Contains(missing, storage) {
		migration = fmt.Sprintf("%s is the live CRD's storage version, so nothing has been migrated from it: first make another version the storage version with %s still declared", storage, storage)
	} else if notes != nil {
		if note := notes(live.Name); note != "" {
			migration = note
		}
	}
	return fmt.Errorf("CRD %s not updated: objects may still be stored in %s (status.storedVersions %s), which the template no longer declares: %s; %s; keep %s declared until the engine has migrated them (the CRD's StorageMigrated event)",
		crd.Name, strings.Join(missing, ", "), strings.Join(live.Status.StoredVersions, ", "), count, migration, strings.Join(missing, ", "))
}

// countPage is how many objects' metadata one list of countObjects reads.
const countPage = 500

// countObjects counts the objects of the live CRD's kind with
// metadata-only lists, in pages (the apiserver's remainingItemCount, when
// it gives one, saves the other pages). It lists in a missing version if
// the CRD still serves it (its objects need no conversion), else in
// another served version.
func countObjects(ctx context.Context, r client.Reader, live *apiextensionsv1.CustomResourceDefinition, missing []string) (int, error) {
	var versions []string
	for _, v := range live.Spec.Versions {
		if v.Served && slices.Contains(missing, v.Name) {
			versions = append(versions, v.Name)
		}
	}
	for _, v := range live.Spec.Versions {
		if v.Served && !slices.Contains(missing, v.Name) {
			versions = append(versions, v.Name)
		}
	}
	var errs []error
	for _, v := range versions {
		n, err := countIn(ctx, r, schema.GroupVersionKind{Group: live.Spec.Group, Version: v, Kind: live.Spec.Names.Kind + "List"})
		if err == nil {
			return n, nil
		}
		errs = append(errs, fmt.Errorf("in %s: %w", v, err))
	}
	if len(errs) == 0 {
		return 0, fmt.Errorf("the CRD serves no version")
	}
	return 0, errors.Join(errs...)
}

func countIn(ctx context.Context, r client.Reader, listGVK schema.GroupVersionKind) (int, error) {
	n, cont := 0, ""
	for {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(listGVK)
		if err := r.List(ctx, list, client.Limit(countPage), client.Continue(cont)); err != nil {
			return 0, err
		}
		n += len(list.Items)
		cont = list.Continue
		if cont == "" {
			return n, nil
		}
		if list.RemainingItemCount != nil {
			return n + int(*list.RemainingItemCount), nil
		}
	}
}

func storageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
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
