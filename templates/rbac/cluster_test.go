package rbac

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/cuengine/engine/templates"
)

// placement puts a Namespace and, behind an if, a Job in the cluster its
// spec names, a Deployment in west and a ConfigMap in east literally, and
// a Service beside the parent.
const placement = `package placement

parent: {apiVersion: "example.com/v1", kind: "Placement", spec: {cluster: string, batch: *false | bool}}
crd: scope: "Cluster"
policy: {clusterScoped: true, crossNamespace: true, clusters: ["west", "east"]}
children: ns: {cluster: parent.spec.cluster, apiVersion: "v1", kind: "Namespace", metadata: name: parent.metadata.name}
children: app: {cluster: "west", apiVersion: "apps/v1", kind: "Deployment", metadata: {name: "app", namespace: "apps"}}
children: note: {cluster: "east", apiVersion: "v1", kind: "ConfigMap", metadata: {name: "note", namespace: "apps"}}
children: svc: {apiVersion: "v1", kind: "Service", metadata: {name: "svc", namespace: "default"}}
children: {
	if parent.spec.batch {
		job: {cluster: parent.spec.cluster, apiVersion: "batch/v1", kind: "Job", metadata: {name: "job", namespace: parent.metadata.name}}
	}
}
`

// anywhere may use any registered cluster, and puts a claim in north.
const anywhere = `package anywhere

parent: {apiVersion: "example.com/v1", kind: "Anywhere"}
policy: clusters: true
children: claim: {cluster: "north", apiVersion: "v1", kind: "PersistentVolumeClaim", metadata: name: "claim"}
children: local: {apiVersion: "v1", kind: "Secret", metadata: name: "local"}
`

// local puts nothing in a workload cluster.
const local = `package local

parent: {apiVersion: "example.com/v1", kind: "Local"}
children: cm: {apiVersion: "v1", kind: "ServiceAccount", metadata: name: "sa"}
`

func writeTemplates(t *testing.T, srcs map[string]string) *templates.Set {
	t.Helper()
	dir := t.TempDir()
	for name, src := range srcs {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, name), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name, name+".cue"), []byte(src), 0o644))
	}
	set, err := templates.Load(dir)
	require.NoError(t, err)
	return set
}

// TestClusterRBAC: the role of a workload cluster grants the kinds of the
// children that may go there (named literally, or computed from the spec
// when the policy allows the cluster, behind an if too), with the verbs
// the engine uses there, and nothing of the children that stay local or
// go to another cluster.
func TestClusterRBAC(t *testing.T) {
	set := writeTemplates(t, map[string]string{"placement": placement, "anywhere": anywhere, "local": local})
	rule := func(group string, res ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: res, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}}
	}
	for _, c := range []struct {
		cluster   string
		rules     []rbacv1.PolicyRule
		templates []string
	}{
		{"west", []rbacv1.PolicyRule{rule("", "namespaces"), rule("apps", "deployments"), rule("batch", "jobs")}, []string{"anywhere", "placement"}},
		{"east", []rbacv1.PolicyRule{rule("", "configmaps", "namespaces"), rule("batch", "jobs")}, []string{"anywhere", "placement"}},
		{"north", []rbacv1.PolicyRule{rule("", "persistentvolumeclaims")}, []string{"anywhere"}},
	} {
		t.Run(c.cluster, func(t *testing.T) {
			roles := GenerateCluster(set, c.cluster, ClusterOptions{Name: "engine", ServiceAccount: "engine", Namespace: "engine-system"})
			assert.Equal(t, c.rules, roles.ClusterRole.Rules)
			assert.Equal(t, c.templates, roles.Templates)
			assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "engine", Namespace: "engine-system"}}, roles.ClusterRoleBinding.Subjects)
			assert.Equal(t, "engine", roles.ClusterRoleBinding.RoleRef.Name)
		})
	}
	roles := GenerateCluster(set, "west", ClusterOptions{Name: "mgmt-engine", User: "engine@mgmt"})
	assert.Equal(t, []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "engine@mgmt"}}, roles.ClusterRoleBinding.Subjects)
	assert.Equal(t, "mgmt-engine", roles.ClusterRole.Name)

	local := writeTemplates(t, map[string]string{"local": local})
	roles = GenerateCluster(local, "west", ClusterOptions{Name: "engine", ServiceAccount: "engine", Namespace: "engine-system"})
	assert.Empty(t, roles.Templates, "no template may use west")
	assert.Empty(t, roles.ClusterRole.Rules)
}

// TestClusterSecretsRBAC: a template that may put children in a workload
// cluster gives the engine get, list and watch on the Secrets of
// --clusters-namespace, in that namespace only; without one, the roles
// are what they were.
func TestClusterSecretsRBAC(t *testing.T) {
	secrets := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}}
	multi := writeTemplates(t, map[string]string{"placement": placement})
	plain := writeTemplates(t, map[string]string{"local": local})
	byNamespace := func(r *Roles) map[string][]rbacv1.PolicyRule {
		out := map[string][]rbacv1.PolicyRule{}
		for i, role := range r.Roles {
			out[role.Namespace] = role.Rules
			assert.Equal(t, role.Namespace, r.RoleBindings[i].Namespace)
		}
		for _, rule := range r.ClusterRole.Rules {
			assert.NotEqual(t, secrets, rule, "never cluster-wide")
		}
		return out
	}
	opts := Options{Name: "engine", ServiceAccount: "engine", Namespace: "engine-system"}

	got := byNamespace(Generate(multi, opts))
	assert.Len(t, got, 1)
	assert.Equal(t, secrets, got["engine-system"][len(got["engine-system"])-1], "the engine's namespace, by default")

	withNS := opts
	withNS.ClustersNamespace = "fleet"
	got = byNamespace(Generate(multi, withNS))
	assert.Equal(t, []rbacv1.PolicyRule{secrets}, got["fleet"])
	assert.NotContains(t, got["engine-system"], secrets)

	off := opts
	off.ClustersNamespace = "-"
	got = byNamespace(Generate(multi, off))
	assert.Len(t, got, 1)
	assert.NotContains(t, got["engine-system"], secrets, "workload clusters turned off")

	assert.Equal(t, Generate(plain, opts), Generate(plain, withNS), "no template uses a cluster: --clusters-namespace changes nothing")
	assert.NotContains(t, byNamespace(Generate(plain, withNS)), "fleet")
}
