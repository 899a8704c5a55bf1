package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gadgetTemplate's child is a Gadget, a kind only the CRD file of
// templates/testdata/childschema/crds defines.
const gadgetTemplate = `parent: {apiVersion: "example.com/v1", kind: "Shop", spec: mode: *"fast" | string}
children: g: {
	apiVersion: "tools.example.org/v1"
	kind:       "Gadget"
	metadata: name: "g"
	spec: cuont: 1
}
`

const gadgetCRDs = "../../templates/testdata/childschema/crds"

// vet, test and render check children against the CRDs of --crds, and
// without them warn that the kind is not checked.
func TestCRDsFlag(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "shop.cue"), []byte(gadgetTemplate), 0o644))
	cr := filepath.Join(t.TempDir(), "shop.yaml")
	require.NoError(t, os.WriteFile(cr, []byte("apiVersion: example.com/v1\nkind: Shop\nmetadata: {name: s, namespace: default}\nspec: {}\n"), 0o644))

	const want = "shop.cue:6:8: children.g.spec.cuont: field not allowed"
	for _, args := range [][]string{
		{"vet", "--templates", dir, "--crds", gadgetCRDs},
		{"render", "--templates", dir, "--crds", gadgetCRDs, "-f", cr},
	} {
		t.Run(args[0], func(t *testing.T) {
			_, errOut, code := run(t, args...)
			assert.Equal(t, 1, code)
			assert.Contains(t, errOut, want)
		})
	}

	t.Run("without --crds", func(t *testing.T) {
		out, errOut, code := run(t, "vet", "--templates", dir)
		assert.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "ok  shop.cue")
		assert.Equal(t, "warning: shop.cue: children.g: kind Gadget.tools.example.org/v1 has no schema; its children are not checked (engine vet --crds DIR adds CRDs)\n", errOut)
	})

	t.Run("a directory that does not exist", func(t *testing.T) {
		_, errOut, code := run(t, "vet", "--templates", dir, "--crds", filepath.Join(dir, "nope"))
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut, "--crds: read CRDs: lstat "+filepath.Join(dir, "nope")+": no such file or directory")
	})
}

// A child of a CRD whose schema lists only spec passes vet --crds: the
// apiserver adds apiVersion, kind and metadata itself.
func TestCRDsFlagSpecOnly(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "shop.cue"), []byte(`parent: {apiVersion: "example.com/v1", kind: "Shop"}
children: w: {
	apiVersion: "tools.example.org/v1"
	kind:       "Wheel"
	metadata: {name: "w", labels: app: "shop"}
	spec: size: 3
}
`), 0o644))
	out, errOut, code := run(t, "vet", "--templates", dir, "--crds", "../../templates/testdata/childschema/nulls")
	assert.Equal(t, 0, code, errOut)
	assert.Empty(t, errOut)
	assert.Contains(t, out, "ok  shop.cue")
}

// engine vet and engine rbac name a child whose kind is computed.
func TestComputedKindWarnings(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "app.cue"), []byte(`parent: {apiVersion: "example.com/v1", kind: "App", spec: workload: *"Deployment" | "StatefulSet"}
children: w: {
	apiVersion: "apps/v1"
	kind:       parent.spec.workload
	metadata: name: "w"
}
`), 0o644))
	const want = "warning: app.cue:4:14: children.w: the kind is computed (kind: parent.spec.workload), so engine rbac generates no rule for it and the apiserver refuses the engine's writes of it; write apiVersion and kind as strings, one child per kind the spec may choose (each under an if), so that engine rbac grants each\n"
	for _, cmd := range []string{"vet", "rbac"} {
		t.Run(cmd, func(t *testing.T) {
			_, errOut, code := run(t, cmd, "--templates", dir)
			assert.Equal(t, 0, code, errOut)
			assert.Equal(t, want, errOut)
		})
	}
}

// engine vet --crds names a child kind that is neither built in, nor a
// template's, nor among the CRDs given: the cluster would not serve it.
func TestVetMissingKinds(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "shop.cue"), []byte(`parent: {apiVersion: "example.com/v1", kind: "Shop"}
children: e: {
	apiVersion: "late.example.org/v1"
	kind:       "Egg"
	metadata: name: "e"
}
`), 0o644))
	out, errOut, code := run(t, "vet", "--templates", dir, "--crds", gadgetCRDs)
	assert.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "ok  shop.cue")
	assert.Equal(t, "warning: shop.cue: children.e: kind Egg.late.example.org/v1 is missing: not built in, not a template's and not in --crds; "+
		"the engine refuses the child (Synced=False, reason ChildRefused) until a CRD serves the kind, and retries when one is installed\n", errOut)
}
