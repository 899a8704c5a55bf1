package render

import (
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates"
)

// IsDeclaredConnectionSecret reports whether a live child is the
// connection Secret of one of a rendering's resources. The reconciler
// writes such a Secret from the provider's outputs, so no rendering
// produces it: it stays (it is no delete, for engine diff or a rollout's
// hold) as long as its resource declares it.
func IsDeclaredConnectionSecret(resources []templates.Resource, c *unstructured.Unstructured) bool {
	of, ok := c.GetAnnotations()[contract.AnnotationConnectionSecretOf]
	if !ok || c.GetKind() != "Secret" || c.GroupVersionKind().Group != "" {
		return false
	}
	return slices.ContainsFunc(resources, func(r templates.Resource) bool {
		return r.Name == of && r.ConnectionSecret == c.GetName()
	})
}
