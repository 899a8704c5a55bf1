package templates

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAdmitDefaultsPrunesAndValidates(t *testing.T) {
	tm := loadOne(t, examples, "mykind")

	stored, pruned, err := tm.Admit(mykind(map[string]any{"deploymentName": "web", "foo": "bar"}))
	require.NoError(t, err)
	assert.Equal(t, []string{"spec.foo"}, pruned)
	assert.Equal(t, map[string]any{"deploymentName": "web", "replicas": int64(1)}, stored.Object["spec"],
		"the unknown field dropped, the CRD's default applied")

	_, _, err = tm.Admit(mykind(map[string]any{"deploymentName": "web", "replicas": int64(-1)}))
	assert.EqualError(t, err, "parent.spec.replicas: refused by the CRD schema, as the apiserver would refuse it: "+
		"Invalid value: -1: spec.replicas in body should be greater than or equal to 0")

	_, _, err = tm.Admit(mykind(map[string]any{"replicas": int64(2)}))
	assert.EqualError(t, err, "parent.spec.deploymentName: refused by the CRD schema, as the apiserver would refuse it: Required value")
}

func TestLoadSkipsTests(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join(examples, "mykind.cue"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "mykind.cue"), src, 0o644))
	// A stray .cue file directly in tests/ would be a template if Load did
	// not skip the directory.
	require.NoError(t, os.MkdirAll(filepath.Join(dir, TestsDir, "mykind", "defaults"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, TestsDir, "shared.cue"), []byte("x: 1\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, TestsDir, "mykind", "defaults", "expect.cue"), []byte("status: {}\n"), 0o644))

	set, err := Load(dir)
	require.NoError(t, err)
	require.Len(t, set.Templates(), 1)
	assert.Equal(t, "mykind.cue", set.Templates()[0].Path)
}
