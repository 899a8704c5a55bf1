package render

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates"
	"github.com/cuengine/engine/templates/policy"
)

const testNamespace = "ns"

var tenantGVK = schema.GroupVersionKind{Group: "test.cuengine.dev", Version: "v1", Kind: "Tenant"}

// testParent is a parent as the apiserver stores it: namespaced, with a
// UID and a generation.
func testParent(gvk schema.GroupVersionKind, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(testNamespace)
	u.SetName(name)
	u.SetUID(types.UID("uid-" + name))
	u.SetGeneration(1)
	return u
}

// TestDesiredPolicy: where a template may put children: the parent's
// namespace always, another namespace only when the policy allows all or
// lists it, a cluster-scoped kind only with clusterScoped.
func TestDesiredPolicy(t *testing.T) {
	parent := testParent(tenantGVK, "acme", map[string]any{})
	configMap := func(ns string) templates.Child {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "namespace": ns}}}
		return templates.Child{Name: "c", Object: obj}
	}
	listed := policy.Policy{CrossNamespace: policy.Namespaces{Names: []string{"shared"}}}
	all := policy.Policy{CrossNamespace: policy.Namespaces{All: true}}
	for _, tc := range []struct {
		name   string
		policy policy.Policy
		ns     string
		err    string
		owned  bool
	}{
		{"own namespace", policy.Policy{}, testNamespace, "", true},
		{"defaulted to the parent's", policy.Policy{}, "", "", true},
		{"elsewhere without a policy", policy.Policy{}, "shared", `child c: ConfigMap "c" is in namespace "shared", not the parent's "ns"; set policy: crossNamespace: true in the template to allow it`, false},
		{"listed", listed, "shared", "", false},
		{"not listed", listed, "kube-system", `child c: ConfigMap "c" is in namespace "kube-system", which the template's policy.crossNamespace does not list (shared)`, false},
		{"all", all, "kube-system", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj, err := Desired(parent, tc.policy, OfflineScoper{}, configMap(tc.ns))
			if tc.err != "" {
				require.EqualError(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.owned, len(obj.GetOwnerReferences()) == 1, "an owner reference only in the parent's namespace")
		})
	}
}

// TestRenderBound: a revision whose own policy is wider than the newest
// template's (Options.Bound) renders only the children both allow, and
// the refusal says that the newest policy bounds it.
func TestRenderBound(t *testing.T) {
	tpl := testTemplate(t, tenantGVK) // crossNamespace: true, clusterScoped: true
	parent := testParent(tenantGVK, "acme", map[string]any{})
	for _, tc := range []struct {
		name     string
		bound    *policy.Policy
		children []string
		refused  []string
	}{
		{"unbounded", nil, []string{"Namespace/tenant-acme", "ConfigMap/tenant-acme/settings"}, nil},
		{"bound as wide", &policy.Policy{CrossNamespace: policy.Namespaces{All: true}, ClusterScoped: true},
			[]string{"Namespace/tenant-acme", "ConfigMap/tenant-acme/settings"}, nil},
		{"narrowed", &policy.Policy{CrossNamespace: policy.Namespaces{Names: []string{"shared"}}}, nil, []string{
			`child settings: ConfigMap "settings" is in namespace "tenant-acme", which the template's policy.crossNamespace does not list (shared); the revision this object runs allowed it, but no revision may go beyond the newest template's policy`,
			`child tenant: Namespace "tenant-acme" is cluster-scoped; set policy: clusterScoped: true in the template to allow it; the revision this object runs allowed it, but no revision may go beyond the newest template's policy`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Render(tpl, parent, nil, Options{Bound: tc.bound})
			require.NoError(t, err)
			var children, refused []string
			for _, c := range out.Children {
				children = append(children, strings.Replace(c.GetKind()+"/"+c.GetNamespace()+"/"+c.GetName(), "//", "/", 1))
			}
			for _, err := range out.Refused {
				refused = append(refused, err.Error())
			}
			assert.Equal(t, tc.children, children)
			assert.Equal(t, tc.refused, refused)
		})
	}
}

// TestDesiredNullRemovesTheField: a template's null removes the field,
// wherever it is (issue 54: a trait that deletes a label by null, in the
// style of KubeVela's labels trait, left `tier: ""` on the Deployment,
// the engine's label merge reading null as an empty string, and `tier:
// null` in its pod template). Elements of a list stay: a null there is
// not a field.
func TestDesiredNullRemovesTheField(t *testing.T) {
	parent := testParent(tenantGVK, "acme", map[string]any{})
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "labels": map[string]any{"app": "web", "tier": nil}, "annotations": nil},
		"spec": map[string]any{
			"replicas": nil,
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": "web", "tier": nil}},
				"spec":     map[string]any{"containers": []any{map[string]any{"name": "web", "image": "nginx", "args": []any{"a", nil}, "resources": nil}}},
			},
		},
	}}
	got, err := Desired(parent, policy.Policy{}, OfflineScoper{}, templates.Child{Name: "web", Object: obj})
	require.NoError(t, err)
	labels := got.GetLabels()
	assert.NotContains(t, labels, "tier", "no empty label in place of the null")
	assert.Equal(t, "web", labels["app"])
	podLabels, _, _ := unstructured.NestedMap(got.Object, "spec", "template", "metadata", "labels")
	assert.Equal(t, map[string]any{"app": "web"}, podLabels)
	_, found, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", "replicas")
	assert.False(t, found)
	container := got.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	assert.NotContains(t, container, "resources")
	assert.Equal(t, []any{"a", nil}, container["args"], "a list's elements are not fields")
	assert.NotNil(t, got.GetAnnotations()[contract.AnnotationParent], "the engine's annotations, the template's null notwithstanding")
	assert.Contains(t, obj.Object["metadata"].(map[string]any)["labels"], "tier", "the template's object is not changed")
}
