package webhooks

import (
	"context"
	"fmt"
	"slices"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates"
)

// webhookName names the one validating webhook of the configuration.
const webhookName = "parents.engine.cuengine.dev"

// annotationInjectCA is cert-manager's cainjector annotation: the CA of
// the named Certificate ("namespace/name") becomes the caBundle.
const annotationInjectCA = "cert-manager.io/inject-ca-from"

// matchSpecWrites calls the webhook only for a create, or an update that
// changes the spec of an object not being deleted: status writes (another
// resource, parents/status), label, annotation and finalizer edits, and
// the removal of a finalizer from an object being deleted never wait on
// the engine.
var matchSpecWrites = []admissionregistrationv1.MatchCondition{
	{Name: "not-being-deleted", Expression: "!has(object.metadata.deletionTimestamp)"},
	{Name: "spec-written", Expression: "request.operation == 'CREATE' || !has(object.spec) || !has(oldObject.spec) || object.spec != oldObject.spec"},
}

// configuration is the ValidatingWebhookConfiguration for set: one rule
// per kind whose template needs admission, nil when none does.
func (o *Options) configuration(set *templates.Set) *admissionregistrationv1.ValidatingWebhookConfiguration {
	var rules []admissionregistrationv1.RuleWithOperations
	for _, t := range set.Templates() {
		if !t.NeedsAdmission() {
			continue
		}
		crd := t.CRD()
		scope := admissionregistrationv1.NamespacedScope
		if crd.Spec.Scope == "Cluster" {
			scope = admissionregistrationv1.ClusterScope
		}
		var versions []string // each served version, the hub first
		for _, v := range t.Versions() {
			if v.Served {
				versions = append(versions, v.Name)
			}
		}
		rules = append(rules, admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule: admissionregistrationv1.Rule{
				APIGroups:   []string{t.GVK.Group},
				APIVersions: versions,
				Resources:   []string{crd.Spec.Names.Plural},
				Scope:       &scope,
			},
		})
	}
	if len(rules) == 0 {
		return nil
	}
	path := PathValidate
	cc := admissionregistrationv1.WebhookClientConfig{}
	if o.URL != "" {
		url := o.URL + path
		cc.URL = &url
	} else {
		port := int32(o.ServicePort)
		cc.Service = &admissionregistrationv1.ServiceReference{Namespace: o.Namespace, Name: o.Service, Path: &path, Port: &port}
	}
	failure := o.FailurePolicy
	// Exact: a write in another version than the hub comes as written and
	// the engine converts it (validate.go toHub); with Equivalent the
	// apiserver would also convert the stored old object, and an old
	// object that does not convert would make every update of it fail.
	exact := admissionregistrationv1.Exact
	sideEffects := admissionregistrationv1.SideEffectClassNone
	timeout := int32(o.Timeout.Seconds())
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   o.ConfigurationName,
			Labels: map[string]string{contract.LabelManagedBy: contract.ManagedByValue},
		},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    webhookName,
			ClientConfig:            cc,
			Rules:                   rules,
			FailurePolicy:           &failure,
			MatchPolicy:             &exact,
			SideEffects:             &sideEffects,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
			MatchConditions:         slices.Clone(matchSpecWrites),
		}},
	}
	if o.CertManagerCertificate != "" {
		vwc.Annotations = map[string]string{annotationInjectCA: o.CertManagerCertificate}
	}
	return vwc
}

// matchNothing holds a configuration back: a webhook with a condition
// that is false is never called.
var matchNothing = admissionregistrationv1.MatchCondition{Name: "ca-bundle-pending", Expression: "false"}

// syncConfiguration applies the configuration for set (server-side apply:
// the caBundle, written by the rotator or the cainjector, is theirs and
// kept), or deletes it when no template needs admission.
//
// A configuration without a caBundle would refuse every write to its
// kinds (the apiserver does not trust the serving certificate) until the
// CA is injected: so while it has none, it is applied matching nothing,
// and in full once the CA is there, or after caWait without it.
func (o *Options) syncConfiguration(ctx context.Context, c client.Client, set *templates.Set) error {
	vwc := o.configuration(set)
	if vwc == nil {
		old := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: o.ConfigurationName}}
		if err := c.Delete(ctx, old); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting ValidatingWebhookConfiguration %s: %w", o.ConfigurationName, err)
		}
		return nil
	}
	injected, err := o.caInjected(ctx, c)
	if err != nil {
		return err
	}
	if !injected {
		held := vwc.DeepCopy()
		held.Webhooks[0].MatchConditions = append(held.Webhooks[0].MatchConditions, matchNothing)
		if err := o.apply(ctx, c, held); err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, o.caWait())
		err := wait.PollUntilContextCancel(wctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			return o.caInjected(ctx, c)
		})
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "no CA injected into the webhook configuration: applying it anyway, writes to its kinds fail until one is",
				"configuration", o.ConfigurationName, "waited", o.caWait())
		}
	}
	return o.apply(ctx, c, vwc)
}

// caWait bounds the wait for the CA's injection.
func (o *Options) caWait() time.Duration {
	if o.CAWait > 0 {
		return o.CAWait
	}
	return 30 * time.Second
}

// caInjected says whether the configuration exists with a caBundle.
func (o *Options) caInjected(ctx context.Context, c client.Client) (bool, error) {
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	err := c.Get(ctx, client.ObjectKey{Name: o.ConfigurationName}, vwc)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading ValidatingWebhookConfiguration %s: %w", o.ConfigurationName, err)
	}
	for _, w := range vwc.Webhooks {
		if w.Name == webhookName {
			return len(w.ClientConfig.CABundle) > 0, nil
		}
	}
	return false, nil
}

// apply writes vwc by server-side apply, as the engine.
func (o *Options) apply(ctx context.Context, c client.Client, vwc *admissionregistrationv1.ValidatingWebhookConfiguration) error {
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(vwc)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: raw}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(contract.FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying ValidatingWebhookConfiguration %s: %w", o.ConfigurationName, err)
	}
	return nil
}
