package templates

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRestore: a template compiled back from its Files is the same
// template (kind, hash, schema, results), also for a directory template
// that imports a package from cue.mod, without the directory.
func TestRestore(t *testing.T) {
	set, err := Load("../examples/templates")
	require.NoError(t, err)
	require.NotEmpty(t, set.Templates())
	for _, orig := range set.Templates() {
		t.Run(orig.Path, func(t *testing.T) {
			files := orig.Files()
			require.NotEmpty(t, files)
			got, err := Restore(orig.Path, files)
			require.NoError(t, err)
			assert.Equal(t, orig.GVK, got.GVK)
			assert.Equal(t, orig.Hash, got.Hash)
			assert.Equal(t, orig.Policy, got.Policy)
			assert.Equal(t, orig.CRD(), got.CRD())
			assert.Equal(t, orig.ChildKinds(), got.ChildKinds())
		})
	}
	_, err = Restore("nothere.cue", set.Templates()[0].Files())
	assert.EqualError(t, err, "revision holds no template nothere.cue")
	_, err = Restore("x.cue", map[string]string{"../escape.cue": "x: 1"})
	assert.EqualError(t, err, `revision file "../escape.cue" is outside the templates directory`)
}
