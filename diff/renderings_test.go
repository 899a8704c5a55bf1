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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/cuengine/engine/templates"
)

// readerTemplate compiles a Reader template whose references block is
// refs; its child copies observed.settings.data.greeting when there is one.
func readerTemplate(t *testing.T, refs string) *templates.Template {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "reader.cue"), []byte(`package reader

parent: {apiVersion: "unit.cuengine.dev/v1", kind: "Reader"}
`+refs+`
children: copy: {apiVersion: "v1", kind: "ConfigMap", metadata: name: parent.metadata.name, data: greeting: *observed.settings.data.greeting | "none"}
`), 0o644))
	set, err := templates.Load(dir)
	require.NoError(t, err)
	return set.Templates()[0]
}

// TestDiffRenderingsReadEachTemplatesReferences: each side of `engine diff
// --revision` sees the references of its own template, as the engine
// running that revision would. (Before render.Observe, both sides saw the
// references of both templates, the later template's view winning, and a
// reference missing for one side was reported against the other.)
func TestDiffRenderingsReadEachTemplatesReferences(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	store := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "a"}, Data: map[string]string{"greeting": "hello"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "b"}, Data: map[string]string{"greeting": "hi"}},
	).Build()
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	gvk := schema.GroupVersionKind{Group: "unit.cuengine.dev", Version: "v1", Kind: "Reader"}
	parent := testParent(gvk, "p", map[string]any{})

	readsA := readerTemplate(t, `references: settings: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "a"}`)
	readsB := readerTemplate(t, `references: settings: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "b"}`)
	readsGone := readerTemplate(t, `references: settings: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "gone"}`)
	readsNothing := readerTemplate(t, "")

	t.Run("each its own view", func(t *testing.T) {
		var out strings.Builder
		d := &Differ{Client: store, Mapper: mapper, Out: &out}
		sum, err := d.DiffRenderings(context.Background(), parent, Rendering{Name: "revision 1", Template: readsA}, Rendering{Name: "revision 2", Template: readsB})
		require.NoError(t, err)
		assert.Equal(t, 1, sum.Changed, out.String())
		assert.Contains(t, out.String(), "-  greeting: hello\n+  greeting: hi\n")
	})

	t.Run("a reference only one side has", func(t *testing.T) {
		var out strings.Builder
		d := &Differ{Client: store, Mapper: mapper, Out: &out}
		sum, err := d.DiffRenderings(context.Background(), parent, Rendering{Name: "revision 1", Template: readsA}, Rendering{Name: "revision 2", Template: readsNothing})
		require.NoError(t, err)
		assert.Equal(t, 1, sum.Changed, out.String())
		assert.Contains(t, out.String(), "-  greeting: hello\n+  greeting: none\n")
	})

	t.Run("missing on the side that reads it", func(t *testing.T) {
		var out strings.Builder
		d := &Differ{Client: store, Mapper: mapper, Out: &out}
		_, err := d.DiffRenderings(context.Background(), parent, Rendering{Name: "revision 1", Template: readsGone}, Rendering{Name: "revision 2", Template: readsNothing})
		assert.EqualError(t, err, "revision 1 cannot render Reader ns/p: waiting for referenced ConfigMap ns/gone (references.settings): nothing is created until it exists")
		assert.Empty(t, out.String())
	})
}
