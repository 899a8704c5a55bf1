package templates

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/cuengine/engine/internal/localcluster"
)

// TestGeneratedCRDsOnTheAPIServer installs every generated CRD into a real
// kube-apiserver v1.37.2 (which checks it is structural and valid), then
// lets the apiserver itself enforce the example templates' validation.
func TestGeneratedCRDsOnTheAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane (run without -short)")
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, dir := range []string{examples, "testdata/eval", shops} {
		set, err := Load(dir)
		require.NoError(t, err)
		for _, tm := range set.Templates() {
			crds = append(crds, tm.CRD())
		}
	}
	cluster, err := localcluster.Start(context.Background(), localcluster.Options{CRDs: crds})
	require.NoError(t, err, "the control plane is built by `make assets`")
	t.Cleanup(func() { assert.NoError(t, cluster.Stop()) })
	dyn, err := dynamic.NewForConfig(cluster.Config)
	require.NoError(t, err)
	mykinds := dyn.Resource(schema.GroupVersionResource{Group: "webapp.my.domain", Version: "v1", Resource: "mykinds"}).Namespace("default")

	create := func(name string, spec map[string]any) error {
		u := mykind(spec)
		u.SetName(name)
		u.SetUID("")
		_, err := mykinds.Create(context.Background(), u, metav1.CreateOptions{})
		return err
	}
	require.NoError(t, create("seed", map[string]any{"deploymentName": "mykind", "replicas": int64(1)}))

	got, err := mykinds.Get(context.Background(), "seed", metav1.GetOptions{})
	require.NoError(t, err)
	replicas, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas")
	assert.Equal(t, int64(1), replicas)

	require.NoError(t, create("defaulted", map[string]any{"deploymentName": "mykind"}))
	got, err = mykinds.Get(context.Background(), "defaulted", metav1.GetOptions{})
	require.NoError(t, err)
	replicas, _, _ = unstructured.NestedInt64(got.Object, "spec", "replicas")
	assert.Equal(t, int64(1), replicas, "the CUE default is the CRD default")

	tests := []struct {
		name string
		spec map[string]any
		want string
	}{
		{"negative replicas", map[string]any{"deploymentName": "mykind", "replicas": int64(-1)},
			"spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0"},
		{"long name", map[string]any{"deploymentName": strings.Repeat("a", 65)},
			"spec.deploymentName: Too long: may not be more than 64 bytes"},
		{"missing name", map[string]any{"replicas": int64(1)},
			`spec.deploymentName: Required value`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := create("bad", tt.spec)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	t.Run("shop", func(t *testing.T) { shopOnTheAPIServer(t, dyn) })
}

// shopOnTheAPIServer: the apiserver keeps a user's key in a map that has a
// default, applies the map, list and struct defaults when the fields are
// absent, and stores the status fields the template sets under an `if`
// and in comprehensions.
func shopOnTheAPIServer(t *testing.T, dyn dynamic.Interface) {
	ctx := context.Background()
	res := dyn.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "shops"}).Namespace("default")
	shop := func(name string, spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Shop",
			"metadata": map[string]any{"name": name}, "spec": spec}}
	}
	created, err := res.Create(ctx, shop("team", map[string]any{"labels": map[string]any{"team": "a"}, "ports": []any{int64(80)}}), metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"team": "a"}, created.Object["spec"].(map[string]any)["labels"], "the user's label kept, not the default")

	created, err = res.Create(ctx, shop("defaulted", map[string]any{"ports": []any{}}), metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"labels": map[string]any{"app": "shop"}, "args": []any{"a", "b"}, "size": map[string]any{"cpu": "1"}, "ports": []any{}},
		created.Object["spec"], "the defaults applied")

	status := map[string]any{
		"availableReplicas": int64(3), "labelCount": int64(1), "memory": "1Gi",
		"config": map[string]any{"name": "team", "seen": true}, "ports": map[string]any{"port0": int64(80)},
		"argList": []any{"a"}, "note": "n",
	}
	created.Object["status"] = status
	_, err = res.UpdateStatus(ctx, created, metav1.UpdateOptions{FieldValidation: "Strict"})
	require.NoError(t, err, "no field unknown to the CRD")
	got, err := res.Get(ctx, "defaulted", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, status, got.Object["status"])
}
