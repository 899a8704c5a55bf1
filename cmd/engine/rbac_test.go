package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

const multicluster = "../../examples/multicluster/templates"

// TestRBACCluster: engine rbac --cluster prints the ClusterRole the
// engine needs in a workload cluster for the example Tenant (its
// Namespace, ResourceQuota and Deployment go to the cluster the spec
// names, its ConfigMap stays local), bound to the ServiceAccount or the
// user given; a cluster no template may use, a bad name and the flags of
// the engine's own roles are refused.
func TestRBACCluster(t *testing.T) {
	out, errOut, code := run(t, "rbac", "--templates", multicluster, "--cluster", "east", "--namespace", "platform", "--service-account", "mgmt-engine")
	require.Equal(t, 0, code, errOut)
	docs := strings.Split(out, "\n---\n")
	require.Len(t, docs, 2, "a ClusterRole and its binding")
	var role rbacv1.ClusterRole
	require.NoError(t, yaml.Unmarshal([]byte(docs[0]), &role))
	verbs := []string{"get", "list", "watch", "create", "patch", "delete"}
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces", "resourcequotas"}, Verbs: verbs},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: verbs},
	}, role.Rules, "no ConfigMap: it stays beside the Tenant")
	var binding rbacv1.ClusterRoleBinding
	require.NoError(t, yaml.Unmarshal([]byte(docs[1]), &binding))
	assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "mgmt-engine", Namespace: "platform"}}, binding.Subjects)

	out, errOut, code = run(t, "rbac", "--templates", multicluster, "--cluster", "west", "--user", "engine@mgmt", "--name", "mgmt")
	require.Equal(t, 0, code, errOut)
	docs = strings.Split(out, "\n---\n")
	require.Len(t, docs, 2)
	binding = rbacv1.ClusterRoleBinding{}
	require.NoError(t, yaml.Unmarshal([]byte(docs[1]), &binding))
	assert.Equal(t, []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "engine@mgmt"}}, binding.Subjects)
	assert.Equal(t, "mgmt", binding.RoleRef.Name)

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--cluster", "north"}, 1, `no template's policy.clusters allows cluster "north": the engine puts nothing there`},
		{[]string{"--cluster", "North"}, 2, `--cluster: "North" is not a cluster name`},
		{[]string{"--cluster", "west", "--install-crds"}, 2, "--install-crds shapes the engine's roles in its own cluster, not in workload cluster west"},
		{[]string{"--cluster", "west", "--clusters-namespace", "fleet"}, 2, "--clusters-namespace shapes"},
		{[]string{"--user", "engine@mgmt"}, 2, "--user binds a workload cluster's role: give --cluster NAME"},
	} {
		out, errOut, code := run(t, append([]string{"rbac", "--templates", multicluster}, c.args...)...)
		assert.Equal(t, c.code, code, "%v: %s", c.args, errOut)
		assert.Contains(t, errOut, c.want, "%v", c.args)
		assert.Empty(t, out, "%v", c.args)
	}
}

// TestRBACClustersNamespace: a template that may use a workload cluster
// gives the engine's Role in --clusters-namespace get, list and watch on
// Secrets (there only); the example templates, which use none, get the
// same roles whatever --clusters-namespace says.
func TestRBACClustersNamespace(t *testing.T) {
	secrets := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}}
	roles := func(args ...string) map[string]*rbacv1.Role {
		t.Helper()
		out, errOut, code := run(t, append([]string{"rbac", "--webhook=false"}, args...)...)
		require.Equal(t, 0, code, errOut)
		byNS := map[string]*rbacv1.Role{}
		for _, doc := range strings.Split(out, "\n---\n") {
			if !strings.Contains(doc, "\nkind: Role\n") {
				assert.NotContains(t, doc, "- secrets\n", "no Secret rule outside the Roles")
				continue
			}
			r := &rbacv1.Role{}
			require.NoError(t, yaml.Unmarshal([]byte(doc), r))
			byNS[r.Namespace] = r
		}
		return byNS
	}
	got := roles("--templates", multicluster, "--clusters-namespace", "fleet")
	require.Contains(t, got, "fleet")
	assert.Equal(t, []rbacv1.PolicyRule{secrets}, got["fleet"].Rules)
	assert.NotContains(t, got["engine-system"].Rules, secrets)

	got = roles("--templates", multicluster)
	assert.Len(t, got, 1)
	assert.Contains(t, got["engine-system"].Rules, secrets, "by default the engine's namespace")

	got = roles("--templates", multicluster, "--clusters-namespace", "-")
	assert.NotContains(t, got["engine-system"].Rules, secrets, "workload clusters off")

	plain, errOut, code := run(t, "rbac", "--templates", examples, "--install-crds")
	require.Equal(t, 0, code, errOut)
	withNS, errOut, code := run(t, "rbac", "--templates", examples, "--install-crds", "--clusters-namespace", "fleet")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, plain, withNS)
}
