package rbac

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/cuengine/engine/templates"
)

// Without --install-crds, the certificate rotator still writes the
// caBundle of the CRDs of kinds with several versions, and the storage
// migration their status: update of those only.
func TestConvertingCRDsUpdatable(t *testing.T) {
	set, err := templates.Load("../../examples/versions/templates")
	require.NoError(t, err)
	role := Generate(set, Options{Name: "engine", ServiceAccount: "engine", Namespace: "engine-system"}).ClusterRole
	assert.Contains(t, role.Rules, rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"},
		Verbs: []string{"update", "patch"}, ResourceNames: []string{"apps.apps.example.com"}})
	assert.Contains(t, role.Rules, rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions/status"},
		Verbs: []string{"update"}, ResourceNames: []string{"apps.apps.example.com"}}, "the storage migration trims storedVersions")

	plain, err := templates.Load("../../examples/templates")
	require.NoError(t, err)
	for _, r := range Generate(plain, Options{Name: "engine", ServiceAccount: "engine", Namespace: "engine-system"}).ClusterRole.Rules {
		assert.NotContains(t, r.Resources, "customresourcedefinitions/status")
		if len(r.Resources) == 1 && r.Resources[0] == "customresourcedefinitions" {
			assert.Equal(t, []string{"get", "list", "watch"}, r.Verbs, "no write without a kind that converts")
		}
	}
}
