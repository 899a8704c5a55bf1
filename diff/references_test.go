package diff

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/cuengine/engine/templates"
)

// TestDiffReadsReferences: engine diff reads a parent's references from
// the cluster, as the engine does; a parent whose reference is missing is
// one the engine would leave alone, and is counted as waiting.
func TestDiffReadsReferences(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "reader.cue"), []byte(`package reader

parent: {apiVersion: "unit.cuengine.dev/v1", kind: "Reader", spec: settings: string}
references: settings: {apiVersion: "v1", kind: "ConfigMap", metadata: name: parent.spec.settings}
children: copy: {apiVersion: "v1", kind: "ConfigMap", metadata: name: parent.metadata.name, data: greeting: observed.settings.data.greeting}
`), 0o644))
	set, err := templates.Load(dir)
	require.NoError(t, err)
	tpl := set.Templates()[0]
	gvk := schema.GroupVersionKind{Group: "unit.cuengine.dev", Version: "v1", Kind: "Reader"}
	present, missing := testParent(gvk, "present", map[string]any{"settings": "s"}), testParent(gvk, "missing", map[string]any{"settings": "nope"})

	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	store := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "s"}, Data: map[string]string{"greeting": "hello"}}).Build()
	var out strings.Builder
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	d := &Differ{Client: store, Mapper: mapper, Out: &out}
	sum, err := d.DiffKind(context.Background(), tpl, []*unstructured.Unstructured{present, missing})
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Created, out.String())
	assert.Equal(t, 1, sum.Waiting)
	assert.Contains(t, out.String(), "+  greeting: hello\n")
	assert.Contains(t, out.String(), "# Reader ns/missing: waiting for referenced ConfigMap ns/nope (references.settings): nothing is created until it exists\n")
}
