package render

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Scoper tells whether a kind is namespaced.
type Scoper interface {
	Namespaced(gvk schema.GroupVersionKind) (bool, error)
}

// MapperScoper answers scope questions from the cluster's REST mapper.
type MapperScoper struct {
	Mapper meta.RESTMapper
}

// Namespaced implements Scoper.
func (s MapperScoper) Namespaced(gvk schema.GroupVersionKind) (bool, error) {
	m, err := s.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return false, err
	}
	return m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

// OfflineScoper answers without a cluster, for engine render: the built-in
// cluster-scoped kinds are known, every other kind is taken as namespaced.
type OfflineScoper struct{}

// Namespaced implements Scoper.
func (OfflineScoper) Namespaced(gvk schema.GroupVersionKind) (bool, error) {
	return !clusterScopedBuiltins[gvk.GroupKind()], nil
}

var clusterScopedBuiltins = map[schema.GroupKind]bool{
	{Kind: "Namespace"}:        true,
	{Kind: "Node"}:             true,
	{Kind: "PersistentVolume"}: true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                       true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                true,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:               true,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                 true,
	{Group: "storage.k8s.io", Kind: "CSIDriver"}:                                    true,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                             true,
	{Group: "networking.k8s.io", Kind: "IngressClass"}:                              true,
	{Group: "node.k8s.io", Kind: "RuntimeClass"}:                                    true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}: true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:   true,
	{Group: "apiregistration.k8s.io", Kind: "APIService"}:                           true,
}
