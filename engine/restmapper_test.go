package engine

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cuengine/engine/render"
)

// countingMapper counts the RESTMapping questions it is asked.
type countingMapper struct {
	*meta.DefaultRESTMapper
	asked int
}

func (m *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	m.asked++
	return m.DefaultRESTMapper.RESTMapping(gk, versions...)
}

// TestRememberingMapper: a mapping is asked of the mapper under it
// once; a question about a group that fails forgets the group's mappings,
// so what the mapper under it learns of the group then is not hidden.
func TestRememberingMapper(t *testing.T) {
	deployments := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	statefulSets := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}
	namespaces := schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}
	under := &countingMapper{DefaultRESTMapper: meta.NewDefaultRESTMapper(nil)}
	for _, gvk := range []schema.GroupVersionKind{deployments, statefulSets} {
		under.Add(gvk, meta.RESTScopeNamespace)
	}
	under.Add(namespaces, meta.RESTScopeRoot)
	m := &rememberingMapper{RESTMapper: under, mappings: map[mappingKey]meta.RESTMapping{}}

	// Kinds asked in turn, of one group and of another: each asked below
	// once.
	for range 3 {
		for _, gvk := range []schema.GroupVersionKind{deployments, statefulSets, namespaces} {
			got, err := m.RESTMapping(gvk.GroupKind(), gvk.Version)
			require.NoError(t, err)
			assert.Equal(t, gvk, got.GroupVersionKind)
			got.Resource.Resource = "changed by a caller" // a copy: nothing remembered changes
		}
	}
	assert.Equal(t, 3, under.asked)
	got, err := m.RESTMapping(deployments.GroupKind(), "v1")
	require.NoError(t, err)
	assert.Equal(t, "deployments", got.Resource.Resource)
	assert.Equal(t, meta.RESTScopeNameNamespace, got.Scope.Name())

	// The mapper under it learns that Deployments are now cluster-scoped
	// (a CRD made again) when a question about the group finds no match:
	// the mappings of the group are asked again, the others are not.
	under.DefaultRESTMapper = meta.NewDefaultRESTMapper(nil)
	under.Add(deployments, meta.RESTScopeRoot)
	under.Add(namespaces, meta.RESTScopeRoot)
	asked := under.asked
	_, err = m.RESTMapping(schema.GroupKind{Group: "apps", Kind: "Unknown"})
	require.True(t, meta.IsNoMatchError(err), err)
	got, err = m.RESTMapping(deployments.GroupKind(), "v1")
	require.NoError(t, err)
	assert.Equal(t, meta.RESTScopeNameRoot, got.Scope.Name())
	_, err = m.RESTMapping(namespaces.GroupKind(), "v1")
	require.NoError(t, err)
	assert.Equal(t, asked+2, under.asked, "the unknown kind and Deployments asked again; Namespaces remembered")

	// Errors are not remembered.
	asked = under.asked
	for range 2 {
		_, err = m.RESTMapping(schema.GroupKind{Group: "example.com", Kind: "Unknown"})
		require.Error(t, err)
	}
	assert.Equal(t, asked+2, under.asked)

	// The scoper answers through it.
	namespaced, err := render.MapperScoper{Mapper: m}.Namespaced(namespaces)
	require.NoError(t, err)
	assert.False(t, namespaced)
}
