package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const versionsExample = "../../examples/versions/templates"

func copyVersionsExample(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS(versionsExample)))
	return dir
}

func TestVersionsExamplePasses(t *testing.T) {
	out, errOut, code := run(t, "vet", "--templates", versionsExample)
	require.Equal(t, 0, code, out+errOut)
	assert.Empty(t, errOut)
	out, errOut, code = run(t, "test", "--templates", versionsExample)
	require.Equal(t, 0, code, out+errOut)
	assert.Contains(t, out, "--- PASS: app/v1 (")
	assert.Contains(t, out, "--- PASS: app/v2 (")
}

// A case may give its parent in one version and expect it in another.
func TestTestConvertedMismatchFails(t *testing.T) {
	dir := copyVersionsExample(t)
	edit(t, filepath.Join(dir, "tests/app/v1/converted.yaml"), "replicas: 3", "replicas: 4")
	out, _, code := run(t, "test", "--templates", dir)
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "--- FAIL: app/v1 (")
	assert.Contains(t, out, `tests/app/v1/converted.yaml: apps.example.com/v1 converted to v2 differs:
      spec: want {"container":{"image":"nginx:1.27","replicas":4}}, the conversion gives {"container":{"image":"nginx:1.27","replicas":3}}`)

	// A version the template does not declare is the case's failure.
	edit(t, filepath.Join(dir, "tests/app/v2/parent.yaml"), "apps.example.com/v2", "apps.example.com/v3")
	out, _, _ = run(t, "test", "--templates", dir)
	assert.Contains(t, out, "tests/app/v2/parent.yaml: a App (apps.example.com/v3), but template app.cue is for App (apps.example.com/v2, v1)")
}

// engine vet converts the test cases' parents to every version and back:
// a field the way back loses is an error at the conversion.
func TestVetFindsALossyConversion(t *testing.T) {
	dir := copyVersionsExample(t)
	// v1 forgets the replicas on the way from the hub: v1's default (1)
	// comes back instead of 3.
	edit(t, filepath.Join(dir, "app.cue"), "out: spec: {image: in.spec.container.image, replicas: in.spec.container.replicas}", "out: spec: {image: in.spec.container.image}")
	_, errOut, code := run(t, "vet", "--templates", dir)
	assert.Equal(t, 1, code)
	assert.Equal(t, `app.cue:32:3: versions.v1.fromHub: spec.container.replicas is lost converting the hub v2 to v1 and back: was 3, came back 1 (example tests/app/v1/parent.yaml)
app.cue:32:3: versions.v1.fromHub: spec.container.replicas is lost converting the hub v2 to v1 and back: was 3, came back 1 (example tests/app/v1/converted.yaml)
2 problems converting the test cases' parents between versions`, errOut)
}

// engine render takes a parent in any version of its kind.
func TestRenderParentInAnotherVersion(t *testing.T) {
	out, errOut, code := run(t, "render", "--templates", versionsExample, "-f", filepath.Join(versionsExample, "tests/app/v1/parent.yaml"))
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "apiVersion: apps.example.com/v2\nkind: App\nmetadata:\n  name: web\n  namespace: default\nspec:\n  container:\n    image: nginx:1.27\n    replicas: 3\n")
}
