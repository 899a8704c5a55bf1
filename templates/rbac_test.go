package templates

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
)

// TestRBACScopes: the engine's own objects (Leases, ControllerRevisions)
// are granted by Roles in their namespaces only, and CRD writes only with
// InstallCRDs, updates limited to the templates' own CRDs.
func TestRBACScopes(t *testing.T) {
	set, err := Load("../examples/templates")
	require.NoError(t, err)
	leases := rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: readWrite}
	revisions := rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"controllerrevisions"}, Verbs: allVerbs}
	// The engine watches CRDs to retry the children of a kind installed late.
	watchCRDs := []rbacv1.PolicyRule{{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch"}}}
	for _, tc := range []struct {
		name       string
		opts       RBACOptions
		namespaces []string
		rules      [][]rbacv1.PolicyRule
		crdRules   []rbacv1.PolicyRule
	}{{
		name:       "one namespace",
		opts:       RBACOptions{Name: "engine", ServiceAccount: "engine", Namespace: "engine-system"},
		namespaces: []string{"engine-system"},
		rules:      [][]rbacv1.PolicyRule{{leases, revisions}},
		crdRules:   watchCRDs,
	}, {
		name:       "revisions elsewhere",
		opts:       RBACOptions{Name: "engine", ServiceAccount: "engine", Namespace: "engine-system", RevisionNamespace: "engine-revisions"},
		namespaces: []string{"engine-system", "engine-revisions"},
		rules:      [][]rbacv1.PolicyRule{{leases}, {revisions}},
		crdRules:   watchCRDs,
	}, {
		name:       "revisions in the same namespace, named",
		opts:       RBACOptions{Name: "engine", ServiceAccount: "engine", Namespace: "engine-system", RevisionNamespace: "engine-system"},
		namespaces: []string{"engine-system"},
		rules:      [][]rbacv1.PolicyRule{{leases, revisions}},
		crdRules:   watchCRDs,
	}, {
		name:       "install CRDs",
		opts:       RBACOptions{Name: "engine", ServiceAccount: "engine", Namespace: "engine-system", InstallCRDs: true},
		namespaces: []string{"engine-system"},
		rules:      [][]rbacv1.PolicyRule{{leases, revisions}},
		crdRules: []rbacv1.PolicyRule{
			{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch", "create"}},
			{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"update", "patch"},
				ResourceNames: []string{"gcs.storage.matsumo.dev", "mykinds.webapp.my.domain", "storefronts.apps.cuengine.dev", "teamapps.apps.cuengine.dev", "webapps.apps.cuengine.dev"}},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := RBAC(set, tc.opts)
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
	set, err := Load(dir)
	require.NoError(t, err)
	var got []string
	for _, w := range set.Templates()[0].RBACWarnings() {
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
	set, err = Load(dir)
	require.NoError(t, err)
	got = nil
	for _, w := range set.Templates()[0].RBACWarnings() {
		got = append(got, w.String())
	}
	assert.Equal(t, []string{
		"app.cue:16:15: children.workload: " + fmt.Sprintf(kind, "kind: parent.spec.workload"),
		"app.cue:21:35: children.secret: " + fmt.Sprintf(kind, "kind: _secret"),
	}, got, "every namespace allowed")
}
