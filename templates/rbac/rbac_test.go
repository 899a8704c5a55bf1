package rbac

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/cuengine/engine/templates"
)

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

// graphHead is the parent of the reference tests' templates.
const graphHead = `package t

parent: {
	apiVersion: "example.com/v1"
	kind:       "Shop"
}
`

// writeTemplate writes the file name of template t under dir.
func writeTemplate(t *testing.T, dir, name, src string) {
	t.Helper()
	writeFile(t, filepath.Join(dir, "t", name), []byte(src))
}

// TestRBACScopes: the engine's own objects (Leases, ControllerRevisions)
// are granted by Roles in their namespaces only, and CRD writes only with
// InstallCRDs, updates limited to the templates' own CRDs.
func TestRBACScopes(t *testing.T) {
	set, err := templates.Load("../../examples/templates")
	require.NoError(t, err)
	leases := rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: readWrite}
	revisions := rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"controllerrevisions"}, Verbs: allVerbs}
	// The engine watches CRDs to retry the children of a kind installed late.
	watchCRDs := []rbacv1.PolicyRule{{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch"}}}
	for _, tc := range []struct {
		name       string
		opts       Options
		namespaces []string
		rules      [][]rbacv1.PolicyRule
		crdRules   []rbacv1.PolicyRule
	}{{
		name:       "one namespace",
		opts:       Options{Name: "engine", ServiceAccount: "engine", Namespace: "engine-system"},
		namespaces: []string{"engine-system"},
		rules:      [][]rbacv1.PolicyRule{{leases, revisions}},
		crdRules:   watchCRDs,
	}, {
		name:       "revisions elsewhere",
		opts:       Options{Name: "engine", ServiceAccount: "engine", Namespace: "engine-system", RevisionNamespace: "engine-revisions"},
		namespaces: []string{"engine-system", "engine-revisions"},
		rules:      [][]rbacv1.PolicyRule{{leases}, {revisions}},
		crdRules:   watchCRDs,
	}, {
		name:       "revisions in the same namespace, named",
		opts:       Options{Name: "engine", ServiceAccount: "engine", Namespace: "engine-system", RevisionNamespace: "engine-system"},
		namespaces: []string{"engine-system"},
		rules:      [][]rbacv1.PolicyRule{{leases, revisions}},
		crdRules:   watchCRDs,
	}, {
		name:       "install CRDs",
		opts:       Options{Name: "engine", ServiceAccount: "engine", Namespace: "engine-system", InstallCRDs: true},
		namespaces: []string{"engine-system"},
		rules:      [][]rbacv1.PolicyRule{{leases, revisions}},
		crdRules: []rbacv1.PolicyRule{
			{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch", "create"}},
			{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"update", "patch"},
				ResourceNames: []string{"gcs.storage.matsumo.dev", "mykinds.webapp.my.domain", "storefronts.apps.cuengine.dev", "teamapps.apps.cuengine.dev", "webapps.apps.cuengine.dev"}},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := Generate(set, tc.opts)
			subject := rbacv1.Subject{Kind: "ServiceAccount", Name: "engine", Namespace: "engine-system"}
			var crdRules []rbacv1.PolicyRule
			for _, rule := range r.ClusterRole.Rules {
				assert.NotContains(t, rule.Resources, "leases", "no lease rights cluster-wide")
				assert.NotContains(t, rule.Resources, "controllerrevisions", "no revision rights cluster-wide")
				if rule.APIGroups[0] == "apiextensions.k8s.io" {
					crdRules = append(crdRules, rule)
				}
			}
			assert.Equal(t, tc.crdRules, crdRules)
			assert.Contains(t, r.ClusterRole.Rules, rbacv1.PolicyRule{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}})
			assert.Contains(t, r.ClusterRole.Rules, rbacv1.PolicyRule{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}})
			assert.Equal(t, []rbacv1.Subject{subject}, r.ClusterRoleBinding.Subjects)

			require.Len(t, r.Roles, len(tc.namespaces))
			require.Len(t, r.RoleBindings, len(tc.namespaces))
			for i, ns := range tc.namespaces {
				assert.Equal(t, ns, r.Roles[i].Namespace)
				assert.Equal(t, tc.rules[i], r.Roles[i].Rules)
				assert.Equal(t, ns, r.RoleBindings[i].Namespace)
				assert.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "engine"}, r.RoleBindings[i].RoleRef)
				assert.Equal(t, []rbacv1.Subject{subject}, r.RoleBindings[i].Subjects)
			}
			assert.Len(t, r.Objects(), 2+2*len(tc.namespaces))
		})
	}
}

// computedKinds has children whose kind or namespace the spec chooses.
const computedKinds = `package app

parent: {
	apiVersion: "example.com/v1"
	kind:       "App"
	spec: {
		workload:  *"Deployment" | "StatefulSet"
		namespace: string
	}
}
_secret: "Secret"
_configMap: "ConfigMap"
children: {
	workload: {
		apiVersion: "apps/v1"
		kind:       parent.spec.workload
		metadata: {name: "w", namespace: parent.spec.namespace}
	}
	config: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "c"}
	constant: {apiVersion: "v1", kind: _configMap, metadata: name: "k"}
	secret: {apiVersion: "v1", kind: _secret, metadata: name: "s"}
}
for n in ["a", "b"] {
	children: "\(n)": {apiVersion: "v1", kind: "ConfigMap", metadata: {name: n, namespace: "\(parent.spec.namespace)-\(n)"}}
}
`

// TestRBACWarnings: a child whose kind is computed is named with where and
// what to write instead, unless the constant it computes is granted; a
// namespace from the spec is named unless the policy allows them all.
func TestRBACWarnings(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir+"/app.cue", []byte(computedKinds))
	set, err := templates.Load(dir)
	require.NoError(t, err)
	var got []string
	for _, w := range Warnings(set.Templates()[0]) {
		got = append(got, w.String())
	}
	kind := "the kind is computed (%s), so engine rbac generates no rule for it and the apiserver refuses the engine's writes of it; write apiVersion and kind as strings, one child per kind the spec may choose (each under an if), so that engine rbac grants each"
	namespace := "namespace is computed from the spec (%s): the policy allows the child only in the parent's namespace, and the engine refuses it (Synced=False, reason ChildRefused) when the spec names another; list the namespaces the spec may name in policy: crossNamespace"
	assert.Equal(t, []string{
		"app.cue:16:15: children.workload: " + fmt.Sprintf(kind, "kind: parent.spec.workload"),
		"app.cue:17:36: children.workload: " + fmt.Sprintf(namespace, "parent.spec.namespace"),
		"app.cue:21:35: children.secret: " + fmt.Sprintf(kind, "kind: _secret"),
		`app.cue:24:89: children."\(n)": ` + fmt.Sprintf(namespace, `"\(parent.spec.namespace)-\(n)"`),
	}, got)

	writeFile(t, dir+"/app.cue", []byte(computedKinds+"policy: crossNamespace: true\n"))
	set, err = templates.Load(dir)
	require.NoError(t, err)
	got = nil
	for _, w := range Warnings(set.Templates()[0]) {
		got = append(got, w.String())
	}
	assert.Equal(t, []string{
		"app.cue:16:15: children.workload: " + fmt.Sprintf(kind, "kind: parent.spec.workload"),
		"app.cue:21:35: children.secret: " + fmt.Sprintf(kind, "kind: _secret"),
	}, got, "every namespace allowed")
}

// TestReferenceRBAC: a referenced kind is granted get, list and watch and
// nothing more; Secrets only because a template references them.
func TestReferenceRBAC(t *testing.T) {
	dir := t.TempDir()
	writeTemplate(t, dir, "t.cue", graphHead+`
references: db: {apiVersion: "v1", kind: "Secret", metadata: name: "db"}
references: cfg: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "cfg"}
references: dns: {apiVersion: "config.openshift.io/v1", kind: "DNS", metadata: name: "cluster"}
children: app: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "app", data: url: observed.db.data.url}
`)
	set, err := templates.Load(dir)
	require.NoError(t, err)
	role := Generate(set, Options{Name: "engine", ServiceAccount: "engine", Namespace: "engine-system"}).ClusterRole
	var core, openshift []rbacv1.PolicyRule
	for _, r := range role.Rules {
		switch r.APIGroups[0] {
		case "":
			core = append(core, r)
		case "config.openshift.io":
			openshift = append(openshift, r)
		}
	}
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}, core, "configmaps as a child kind, secrets read only")
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{"config.openshift.io"}, Resources: []string{"dnses"}, Verbs: []string{"get", "list", "watch"}},
	}, openshift)
}

// TestReferenceRBACNamespaces: Secrets and ConfigMaps read only in the
// namespaces the references reach are granted only there, a Role per
// namespace; a Secret read from a parent's namespace is granted in every
// namespace, and engine rbac says which reference needs it.
func TestReferenceRBACNamespaces(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Join(dir, name), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name, name+".cue"), []byte(src), 0o644))
	}
	write("shop", graphHead+`
references: db: {apiVersion: "v1", kind: "Secret", metadata: {name: "db", namespace: "vault"}}
references: cfg: {apiVersion: "v1", kind: "ConfigMap", selector: matchLabels: app: "shop", metadata: namespace: "engine-system"}
children: app: {apiVersion: "v1", kind: "Service", metadata: name: "app"}
`)
	write("region", `package region

parent: {apiVersion: "example.com/v1", kind: "Region", spec: zone: string}
crd: scope: "Cluster"
policy: crossNamespace: ["zone-a", "zone-b"]
references: key: {apiVersion: "v1", kind: "Secret", metadata: {name: "key", namespace: parent.spec.zone}}
children: app: {apiVersion: "v1", kind: "Service", metadata: {name: "app", namespace: parent.spec.zone}}
`)
	set, err := templates.Load(dir)
	require.NoError(t, err)
	roles := Generate(set, Options{Name: "engine", ServiceAccount: "engine", Namespace: "engine-system"})
	for _, r := range roles.ClusterRole.Rules {
		assert.NotContains(t, r.Resources, "secrets", "no Secret rule in the ClusterRole")
		assert.NotContains(t, r.Resources, "configmaps", "no ConfigMap rule in the ClusterRole")
	}
	read := func(res string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{res}, Verbs: []string{"get", "list", "watch"}}
	}
	byNamespace := map[string][]rbacv1.PolicyRule{}
	var order []string
	for i, r := range roles.Roles {
		order = append(order, r.Namespace)
		byNamespace[r.Namespace] = r.Rules
		assert.Equal(t, r.Namespace, roles.RoleBindings[i].Namespace)
	}
	assert.Equal(t, []string{"engine-system", "vault", "zone-a", "zone-b"}, order)
	assert.Equal(t, read("configmaps"), byNamespace["engine-system"][2], "after the leases and revisions")
	assert.Equal(t, []rbacv1.PolicyRule{read("secrets")}, byNamespace["vault"])
	assert.Equal(t, []rbacv1.PolicyRule{read("secrets")}, byNamespace["zone-a"])
	assert.Equal(t, []rbacv1.PolicyRule{read("secrets")}, byNamespace["zone-b"])
	assert.Empty(t, roles.Notes)

	write("team", `package team

parent: {apiVersion: "example.com/v1", kind: "Team"}
references: token: {apiVersion: "v1", kind: "Secret", metadata: name: "token"}
children: app: {apiVersion: "v1", kind: "Service", metadata: name: "app"}
`)
	set, err = templates.Load(dir)
	require.NoError(t, err)
	roles = Generate(set, Options{Name: "engine", ServiceAccount: "engine", Namespace: "engine-system"})
	assert.Contains(t, roles.ClusterRole.Rules, read("secrets"))
	for _, r := range roles.Roles {
		assert.NotContains(t, r.Rules, read("secrets"), "no Role for Secrets: the ClusterRole grants them")
	}
	assert.Equal(t, []string{"Secrets are granted get, list and watch in every namespace: team references.token reads from its parent's namespace, which can be any; " +
		"give such a reference a literal metadata.namespace (or, for a cluster-scoped parent, list its namespaces in policy: crossNamespace) to grant only those namespaces"}, roles.Notes)
}
