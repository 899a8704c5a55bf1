package render

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates"
)

// clusterTemplate is a cluster-scoped Realm whose targets come from the
// spec, so that only the per-parent check can refuse them: a ConfigMap in
// spec.namespace, a ClusterRole when spec.admin, a Secret read from
// spec.secretNamespace.
const clusterTemplate = `package realm

parent: {
	apiVersion: "unit.cuengine.dev/v1"
	kind:       "Realm"
	spec: {
		namespace:       string
		secretNamespace: string
		admin:           *false | bool
	}
}

crd: scope: "Cluster"

references: token: {apiVersion: "v1", kind: "Secret", metadata: {name: "token", namespace: parent.spec.secretNamespace}}

children: settings: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: {name: "settings", namespace: parent.spec.namespace}
}
if parent.spec.admin {
	children: admin: {
		apiVersion: "rbac.authorization.k8s.io/v1"
		kind:       "ClusterRole"
		metadata: name: "realm-admin"
		rules: [{apiGroups: ["*"], resources: ["*"], verbs: ["*"]}]
	}
}
`

func loadClusterTemplate(t *testing.T, policy string) *templates.Template {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "realm.cue"), []byte(clusterTemplate+policy), 0o644))
	set, err := templates.Load(dir)
	require.NoError(t, err)
	return set.Templates()[0]
}

func realm(spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "unit.cuengine.dev/v1", "kind": "Realm", "spec": spec}}
	u.SetName("r")
	u.SetUID(types.UID("uid-r"))
	u.SetGeneration(1)
	return u
}

// TestClusterParentPolicy: a cluster-scoped parent has no namespace of its
// own, so with no policy a child in kube-system, a ClusterRole child and a
// Secret read from another namespace are each refused, naming the policy
// field that would allow them; with the policy they pass.
func TestClusterParentPolicy(t *testing.T) {
	parent := realm(map[string]any{"namespace": "kube-system", "secretNamespace": "vault", "admin": true})

	t.Run("no policy", func(t *testing.T) {
		tpl := loadClusterTemplate(t, "")
		out, err := Render(tpl, parent, nil, Options{})
		require.NoError(t, err)
		assert.Empty(t, out.Children)
		var refused []string
		for _, err := range out.Refused {
			refused = append(refused, err.Error())
		}
		assert.Equal(t, []string{
			`child admin: ClusterRole "realm-admin" is cluster-scoped; set policy: clusterScoped: true in the template to allow it`,
			`child settings: ConfigMap "settings" is in namespace "kube-system"; a cluster-scoped parent has no namespace of its own: list the namespace in policy: crossNamespace in the template to allow it`,
		}, refused)

		_, err = ResolveReferences(tpl, parent, OfflineScoper{}, Limits{})
		require.EqualError(t, err, `reference token: Secret vault/token is in namespace "vault"; a cluster-scoped parent has no namespace of its own: list the namespace in policy: crossNamespace in the template to allow it`)
		var re *Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, contract.ReasonReferenceRefused, re.Reason)
	})

	t.Run("a policy that lists other namespaces", func(t *testing.T) {
		tpl := loadClusterTemplate(t, `policy: crossNamespace: ["shared"]`)
		out, err := Render(tpl, parent, nil, Options{})
		require.NoError(t, err)
		require.Len(t, out.Refused, 2)
		assert.EqualError(t, out.Refused[1], `child settings: ConfigMap "settings" is in namespace "kube-system", which the template's policy.crossNamespace does not list (shared)`)
		_, err = ResolveReferences(tpl, parent, OfflineScoper{}, Limits{})
		require.EqualError(t, err, `reference token: Secret vault/token is in namespace "vault", which the template's policy.crossNamespace does not list (shared)`)
	})

	t.Run("the policy allows them", func(t *testing.T) {
		tpl := loadClusterTemplate(t, `policy: {crossNamespace: ["kube-system", "vault"], clusterScoped: true}`)
		out, err := Render(tpl, parent, nil, Options{})
		require.NoError(t, err)
		assert.Empty(t, out.Refused)
		var got []string
		for _, c := range out.Children {
			got = append(got, c.GetKind()+"/"+c.GetNamespace()+"/"+c.GetName())
			require.Len(t, c.GetOwnerReferences(), 1, "a cluster-scoped parent owns its children wherever they are")
		}
		assert.ElementsMatch(t, []string{"ConfigMap/kube-system/settings", "ClusterRole//realm-admin"}, got)
		refs, err := ResolveReferences(tpl, parent, OfflineScoper{}, Limits{})
		require.NoError(t, err)
		require.Len(t, refs, 1)
		assert.Equal(t, "vault", refs[0].Namespace)
	})
}
