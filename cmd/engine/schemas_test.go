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
