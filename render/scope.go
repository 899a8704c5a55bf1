package render

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cuengine/engine/templates/openapi"
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
	return !openapi.BuiltinClusterScoped(gvk.GroupKind()), nil
}
