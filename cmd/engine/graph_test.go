package main

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files of engine graph under testdata/")

// TestGraphGolden: engine graph on the example templates, in both formats,
// matches testdata/graph.<format> (go test ./cmd/engine -run TestGraphGolden -update rewrites them).
func TestGraphGolden(t *testing.T) {
	for _, format := range []string{"dot", "mermaid"} {
		t.Run(format, func(t *testing.T) {
			out, errOut, code := run(t, "graph", "--templates", examples, "--format", format)
			require.Equal(t, 0, code, errOut)
			path := filepath.Join("testdata", "graph."+format)
			if *updateGolden {
				require.NoError(t, os.WriteFile(path, []byte(out), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, string(want), out)
		})
	}
}

func TestGraphOneKind(t *testing.T) {
	all, _, code := run(t, "graph", "--templates", examples, "--format", "mermaid")
	require.Equal(t, 0, code)
	for _, name := range []string{"Storefront", "storefront", "storefront.apps.cuengine.dev"} {
		out, errOut, code := run(t, "graph", "--templates", examples, "--format", "mermaid", name)
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, all, out, name)
		assert.Contains(t, out, "children_app -->|observed| resources_assets\n", name)
		assert.NotContains(t, out, "MyKind", name)
	}

	_, errOut, code := run(t, "graph", "--templates", examples, "Nope")
	assert.Equal(t, 1, code)
	assert.Equal(t, `no template for "Nope" (the templates are for Gcs, MyKind, Storefront, TeamApp, WebApp)`, errOut)
	_, errOut, code = run(t, "graph", "--templates", examples, "--format", "svg")
	assert.Equal(t, 2, code)
	assert.Equal(t, `--format "svg": want dot or mermaid`, errOut)
}

// TestVetRefusesACycle: a dependency cycle is a template error of vet and
// of graph, with the positions of both references.
func TestVetRefusesACycle(t *testing.T) {
	dir := t.TempDir()
	src := `package loop

parent: {apiVersion: "example.com/v1", kind: "Loop"}
resources: bucket: {provider: "gcs", spec: name: *observed.app.metadata.name | "b"}
children: app: {apiVersion: "v1", kind: "ConfigMap", metadata: name: *observed.bucket.name | "a"}
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "loop.cue"), []byte(src), 0o644))
	want := "loop.cue:5:71: children.app: dependency cycle: children.app reads observed.bucket (loop.cue:5:71), and resources.bucket reads observed.app (loop.cue:4:51); one of them must go"
	for _, cmd := range []string{"vet", "graph"} {
		_, errOut, code := run(t, cmd, "--templates", dir)
		assert.Equal(t, 1, code, cmd)
		assert.Equal(t, want, errOut, cmd)
	}
}
