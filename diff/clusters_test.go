package diff

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/cuengine/engine/templates"
)

// TestDiffSaysAWorkloadClusterChildIsNotCompared: a child the template
// puts in a workload cluster is named, never diffed against this
// cluster, where it is not.
func TestDiffSaysAWorkloadClusterChildIsNotCompared(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "t.cue"), []byte(`parent: {apiVersion: "unit.cuengine.dev/v1", kind: "Placed"}
policy: clusters: ["west"]
children: far: {cluster: "west", apiVersion: "v1", kind: "ConfigMap", metadata: name: "far"}
`), 0o644))
	set, err := templates.Load(dir)
	require.NoError(t, err)
	gvk := schema.GroupVersionKind{Group: "unit.cuengine.dev", Version: "v1", Kind: "Placed"}
	tpl, ok := set.Lookup(gvk)
	require.True(t, ok)
	p := testParent(gvk, "p", map[string]any{})
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	store := fake.NewClientBuilder().WithScheme(scheme).Build()
	var out strings.Builder
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	d := &Differ{Client: store, Mapper: mapper, Out: &out}
	sum, err := d.DiffKind(context.Background(), tpl, []*unstructured.Unstructured{p})
	require.NoError(t, err)
	assert.Equal(t, "# Placed "+testNamespace+"/p: ConfigMap far goes to workload cluster west: not compared (engine diff reads this cluster only)\n", out.String())
	assert.Zero(t, sum.Failed)
}
