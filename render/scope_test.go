package render

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestOfflineScoper: without a cluster, the built-in cluster-scoped kinds
// are known and every other kind is namespaced.
func TestOfflineScoper(t *testing.T) {
	for _, tc := range []struct {
		gvk        schema.GroupVersionKind
		namespaced bool
	}{
		{schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, false},
		{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, false},
		{schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, true},
		{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"}, true},
		{schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Namespace"}, true},
		{tenantGVK, true},
	} {
		namespaced, err := OfflineScoper{}.Namespaced(tc.gvk)
		require.NoError(t, err)
		assert.Equal(t, tc.namespaced, namespaced, "%s", tc.gvk)
	}
}
