package reconciler

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cuengine/engine/contract"
)

func versionOf(uid, rv string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetUID(types.UID(uid))
	u.SetResourceVersion(rv)
	return u
}

func TestAppliedVersions(t *testing.T) {
	p, q := types.NamespacedName{Namespace: "ns", Name: "p"}, types.NamespacedName{Namespace: "ns", Name: "q"}
	var a appliedVersions
	assert.False(t, a.holds(p, versionOf("u1", "1"), "h"), "nothing remembered")

	a.remember(p, versionOf("u1", "1"), "h")
	assert.True(t, a.holds(p, versionOf("u1", "1"), "h"), "the version remembered")
	assert.False(t, a.holds(p, versionOf("u1", "2"), "h"), "a newer version of the child")
	assert.False(t, a.holds(p, versionOf("u1", "1"), "other"), "another desired object")
	assert.False(t, a.holds(q, versionOf("u1", "1"), "h"), "another parent")
	assert.False(t, a.holds(p, versionOf("u2", "1"), "h"), "another child")

	a.remember(p, versionOf("u1", "2"), "h")
	assert.True(t, a.holds(p, versionOf("u1", "2"), "h"))
	assert.False(t, a.holds(p, versionOf("u1", "1"), "h"), "only the latest version is kept")
	assert.Equal(t, 1, a.len(), "one entry per child")

	a.remember(p, versionOf("", "3"), "h")
	a.remember(p, versionOf("u3", ""), "h")
	assert.Equal(t, 1, a.len(), "an object without uid or resource version is not remembered")

	a.remember(p, versionOf("u2", "5"), "h")
	a.remember(q, versionOf("u9", "7"), "h")
	a.keep(p, []types.UID{"u2", "u4"})
	assert.False(t, a.holds(p, versionOf("u1", "2"), "h"), "a child the parent no longer has is dropped")
	assert.True(t, a.holds(p, versionOf("u2", "5"), "h"))
	assert.True(t, a.holds(q, versionOf("u9", "7"), "h"), "other parents are untouched")
	assert.Equal(t, 2, a.len())

	a.keep(p, nil)
	a.forget(q)
	assert.Equal(t, 0, a.len(), "nothing left once the children and the parent are gone")
	assert.Empty(t, a.byParent, "no empty entry per parent left behind")
}

// deployment returns a Deployment as the tests' apiserver stores it, with
// a replica count and a container's args, env and CPU request.
func deployment(replicas any, args []any, env []any, cpu string) *unstructured.Unstructured {
	c := map[string]any{"name": "app", "image": "nginx", "resources": map[string]any{"requests": map[string]any{"cpu": cpu}}}
	if args != nil {
		c["args"] = args
	}
	if env != nil {
		c["env"] = env
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "d", "namespace": "ns", "resourceVersion": "5",
			"labels":      map[string]any{"app": "d"},
			"annotations": map[string]any{contract.AnnotationAppliedHash: "h", "deployment.kubernetes.io/revision": "1"}},
		"spec": map[string]any{
			"replicas": replicas,
			"selector": map[string]any{"matchLabels": map[string]any{"app": "d"}},
			"template": map[string]any{"spec": map[string]any{
				"containers":  []any{c},
				"tolerations": []any{map[string]any{"key": "a"}, map[string]any{"key": "b"}},
				"finalizers":  []any{"x", "y"},
			}},
		},
		"status": map[string]any{"replicas": int64(1)},
	}}
}

// engineFields is the field set of the engine's apply of deployment():
// what the apiserver records for a child with args: [] and an env entry
// whose value is "" (both dropped from the stored object).
const engineFields = `{
	"f:metadata": {"f:labels": {"f:app": {}}, "f:annotations": {"f:` + contract.AnnotationAppliedHash + `": {}}},
	"f:spec": {
		"f:replicas": {},
		"f:selector": {},
		"f:template": {"f:spec": {
			"f:containers": {"k:{\"name\":\"app\"}": {
				".": {}, "f:name": {}, "f:image": {}, "f:args": {},
				"f:env": {"k:{\"name\":\"X\"}": {".": {}, "f:name": {}, "f:value": {}}},
				"f:resources": {"f:requests": {"f:cpu": {}}}
			}},
			"f:tolerations": {"i:1": {"f:key": {}}},
			"f:finalizers": {"v:\"y\"": {}}
		}}
	}
}`

func withFields(u *unstructured.Unstructured, manager string, op metav1.ManagedFieldsOperationType, fields string) *unstructured.Unstructured {
	u.SetManagedFields(append(u.GetManagedFields(), metav1.ManagedFieldsEntry{
		Manager: manager, Operation: op, APIVersion: "apps/v1", FieldsType: "FieldsV1",
		FieldsV1: metav1.NewFieldsV1(fields),
	}))
	return u
}

func TestSameAsApplied(t *testing.T) {
	env := []any{map[string]any{"name": "X"}}
	// The dry run's reply: what the apiserver makes of the engine's apply.
	applied := withFields(deployment(int64(1), nil, env, "500m"), contract.FieldManager, metav1.ManagedFieldsOperationApply, engineFields)
	applied = withFields(applied, "kube-controller-manager", metav1.ManagedFieldsOperationUpdate, `{"f:status": {"f:replicas": {}}}`)

	for _, tc := range []struct {
		name    string
		applied *unstructured.Unstructured
		live    *unstructured.Unstructured
		same    bool
	}{
		{"as stored: normalized quantity, dropped empty values", applied, deployment(int64(1), nil, env, "500m"), true},
		{"a number decoded as float", applied, deployment(float64(1), nil, env, "500m"), true},
		{"fields the engine does not apply differ", applied, func() *unstructured.Unstructured {
			u := deployment(int64(1), nil, env, "500m")
			u.SetResourceVersion("9")
			u.SetAnnotations(map[string]string{contract.AnnotationAppliedHash: "h", "deployment.kubernetes.io/revision": "7", "note": "x"})
			u.Object["status"] = map[string]any{"replicas": int64(4)}
			return u
		}(), true},
		{"replicas changed by another manager", applied, deployment(int64(3), nil, env, "500m"), false},
		// Two integers beyond float64's precision differ (compared as
		// float64s they were the same, and the drift stayed).
		{"an integer beyond float64 changed by one", withFields(deployment(int64(1)<<60, nil, env, "500m"), contract.FieldManager, metav1.ManagedFieldsOperationApply, engineFields),
			deployment(int64(1)<<60+1, nil, env, "500m"), false},
		{"a quantity changed", applied, deployment(int64(1), nil, env, "1"), false},
		{"an owned field added", applied, deployment(int64(1), []any{"--x"}, env, "500m"), false},
		{"an owned list item removed", applied, deployment(int64(1), nil, []any{}, "500m"), false},
		{"an owned list item changed", applied, deployment(int64(1), nil, []any{map[string]any{"name": "X", "value": "y"}}, "500m"), false},
		{"an owned label changed", applied, func() *unstructured.Unstructured {
			u := deployment(int64(1), nil, env, "500m")
			u.SetLabels(map[string]string{"app": "e"})
			return u
		}(), false},
		{"an atomic field changed", applied, func() *unstructured.Unstructured {
			u := deployment(int64(1), nil, env, "500m")
			require.NoError(t, unstructured.SetNestedField(u.Object, map[string]any{"app": "d", "more": "x"}, "spec", "selector", "matchLabels"))
			return u
		}(), false},
		{"an item owned by index changed", applied, func() *unstructured.Unstructured {
			u := deployment(int64(1), nil, env, "500m")
			require.NoError(t, unstructured.SetNestedSlice(u.Object, []any{map[string]any{"key": "a"}, map[string]any{"key": "c"}}, "spec", "template", "spec", "tolerations"))
			return u
		}(), false},
		{"an item owned by value gone", applied, func() *unstructured.Unstructured {
			u := deployment(int64(1), nil, env, "500m")
			require.NoError(t, unstructured.SetNestedSlice(u.Object, []any{"x"}, "spec", "template", "spec", "finalizers"))
			return u
		}(), false},
		{"no field set of the engine's apply", withFields(deployment(int64(1), nil, env, "500m"), "kubectl", metav1.ManagedFieldsOperationApply, engineFields),
			deployment(int64(1), nil, env, "500m"), false},
		{"the engine's fields by an update, not an apply", withFields(deployment(int64(1), nil, env, "500m"), contract.FieldManager, metav1.ManagedFieldsOperationUpdate, engineFields),
			deployment(int64(1), nil, env, "500m"), false},
		{"a field path it cannot read", withFields(deployment(int64(1), nil, env, "500m"), contract.FieldManager, metav1.ManagedFieldsOperationApply, `{"f:spec": {"z:replicas": {}}}`),
			deployment(int64(1), nil, env, "500m"), false},
		{"a field set that is not JSON", withFields(deployment(int64(1), nil, env, "500m"), contract.FieldManager, metav1.ManagedFieldsOperationApply, `{`),
			deployment(int64(1), nil, env, "500m"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.same, sameAsApplied(tc.applied, tc.live))
		})
	}
}

// TestAppliedVersionsIsSmall: the engine remembers a version for every
// child it applied, so the cost per parent is paid by every parent in the
// cache. One child per parent, for 20000 parents, holds under 300 bytes a
// parent once collected; a map per parent held over 500.
func TestAppliedVersionsIsSmall(t *testing.T) {
	const n = 20000
	parents := make([]types.NamespacedName, n)
	children := make([]*unstructured.Unstructured, n)
	for i := range parents {
		parents[i] = types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("p%d", i)}
		children[i] = versionOf(fmt.Sprintf("u%d", i), "12345")
	}
	var a appliedVersions
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range parents {
		a.remember(parents[i], children[i], "0123456789abcdef")
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	require.Equal(t, n, a.len())
	perParent := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	t.Logf("%d bytes held per parent", perParent)
	assert.Less(t, perParent, int64(300))
	runtime.KeepAlive(children)
}
