package templates

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/templates/graph"
)

// graphHead is the parent of the graph tests' templates.
const graphHead = `package t

parent: {
	apiVersion: "example.com/v1"
	kind:       "Shop"
}
`

func TestGraphErrors(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string
	}{
		{
			name: "a cycle through observed",
			body: `
resources: bucket: {provider: "gcs", spec: name: *observed.app.metadata.name | ""}
children: app: {apiVersion: "v1", kind: "ConfigMap", metadata: name: *observed.bucket.name | "x"}
`,
			want: `t/t.cue:9:71: children.app: dependency cycle: children.app reads observed.bucket (t/t.cue:9:71), and resources.bucket reads observed.app (t/t.cue:8:51); one of them must go`,
		},
		{
			name: "a cycle of three, one edge explicit",
			body: `
children: {
	a: {apiVersion: "v1", kind: "ConfigMap", metadata: name: children.b.metadata.name + "a"}
	b: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "b", dependsOn: ["c"]}
	c: {apiVersion: "v1", kind: "ConfigMap", metadata: name: *observed.a.metadata.name | "c"}
}
`,
			want: `t/t.cue:9:59: children.a: dependency cycle: children.a reads fields of b (t/t.cue:9:59), and children.b lists "c" in dependsOn (t/t.cue:10:76), and children.c reads observed.a (t/t.cue:11:60); one of them must go`,
		},
		{
			name: "dependsOn an unknown name",
			body: `
resources: bucket: provider: "gcs"
children: app: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "a", dependsOn: ["bucket", "bukcet"]}
`,
			want: `t/t.cue:9:97: children.app.dependsOn: the template declares no child or resource named "bukcet"`,
		},
		{
			name: "dependsOn itself",
			body: `
resources: bucket: {provider: "gcs", dependsOn: ["bucket"]}
`,
			want: `t/t.cue:8:50: resources.bucket.dependsOn: resources.bucket cannot depend on itself`,
		},
		{
			name: "dependsOn not a list of names",
			body: `
resources: bucket: provider: "gcs"
children: app: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "a", dependsOn: "bucket"}
`,
			want: `t/t.cue:9:86: children.app.dependsOn: must be a list of local names, such as ["bucket"]`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTemplate(t, dir, "t.cue", graphHead+tc.body)
			_, err := Load(dir)
			require.Error(t, err)
			var le *LoadError
			require.ErrorAs(t, err, &le)
			assert.Equal(t, tc.want, err.Error())
		})
	}
}

// TestGraphExamples: the example Storefront's Deployment depends on its
// bucket; an evaluated child lists what it depends on and loses its
// dependsOn field.
func TestGraphExamples(t *testing.T) {
	set, err := Load(examples)
	require.NoError(t, err)
	for _, tm := range set.Templates() {
		for _, n := range tm.Graph().Nodes {
			if tm.Name == "storefront" && n.Name == "app" {
				assert.Equal(t, []string{"assets"}, tm.Graph().Names(graph.ChildNode, "app"))
				continue
			}
			if tm.Name == "webapp" && n.Name == "app" {
				assert.Equal(t, []string{"db"}, tm.Graph().Names(graph.ChildNode, "app"), "the app goes before its database")
				continue
			}
			if tm.Name == "teamapp" && n.Name == "deployment" {
				// Drawn as an input; nothing to order, as it is never created.
				assert.Equal(t, "settings", n.DependsOn[0].Name)
				assert.Empty(t, tm.Graph().Names(graph.ChildNode, "deployment"))
				continue
			}
			assert.Empty(t, n.DependsOn, "%s %s.%s", tm.Name, n.Kind, n.Name)
		}
	}

	dir := t.TempDir()
	writeTemplate(t, dir, "t.cue", graphHead+`
resources: bucket: {provider: "gcs", spec: name: "b"}
children: app: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "a", dependsOn: ["bucket"]}
`)
	res, err := loadOne(t, dir).Evaluate(Input{Parent: shop()})
	require.NoError(t, err)
	require.Len(t, res.Children, 1)
	assert.Equal(t, []string{"bucket"}, res.Children[0].DependsOn)
	assert.NotContains(t, res.Children[0].Object.Object, "dependsOn")
	require.Len(t, res.Resources, 1)
	assert.Empty(t, res.Resources[0].DependsOn)
}

func shop() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Shop",
		"metadata": map[string]any{"name": "s", "namespace": "default"},
	}}
}

// writeTemplate writes one file of the template t (a subdirectory).
func writeTemplate(t *testing.T, dir, name, src string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "t"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "t", name), []byte(src), 0o644))
}
