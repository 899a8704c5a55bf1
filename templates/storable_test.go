package templates

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const smallTemplate = `parent: {apiVersion: "big.cuengine.dev/v1", kind: "Big"}
children: cm: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: parent.metadata.name
}
`

// TestLoadRefusesTemplatesTooLargeToStore: a template whose files would
// not fit one revision (1.7 MB here, etcd refusing requests over 1.5 MiB)
// is refused when it compiles, with its size and the limit; the set is
// still Servable when nothing else fails, the template marked.
func TestLoadRefusesTemplatesTooLargeToStore(t *testing.T) {
	dir := t.TempDir()
	// 1.7 MB of comment: the template is valid, only too large.
	big := smallTemplate + strings.Repeat("// "+strings.Repeat("x", 96)+"\n", 17_000)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big.cue"), []byte(big), 0o644))
	require.Equal(t, 1_700_000+len(smallTemplate), len(big))

	_, err := Load(dir)
	var le *LoadError
	require.ErrorAs(t, err, &le)
	size := StoredSize(map[string]string{"big.cue": big})
	assert.Equal(t, 1_717_197, size, "newlines are escaped in JSON")
	assert.EqualError(t, err, "big.cue: the template's files take 1717197 bytes (1.64 MiB) as a stored revision, more than the 1310720 (1.25 MiB) allowed: etcd refuses requests over 1.5 MiB, and a ControllerRevision holds the files with its metadata; make the files smaller")
	require.NotNil(t, le.Servable, "only too large: servable from a stored revision")
	tpl := le.Servable.Templates()[0]
	assert.Equal(t, "big.cue", tpl.Path)
	assert.EqualError(t, tpl.StoreError(), err.Error())

	t.Run("with another failure, not servable", func(t *testing.T) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "broken.cue"), []byte("parent: {apiVersion: 1}\n"), 0o644))
		_, err := Load(dir)
		require.ErrorAs(t, err, &le)
		assert.Len(t, le.Errors, 2)
		assert.Nil(t, le.Servable)
	})

	t.Run("within the limit", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "big.cue"), []byte(smallTemplate), 0o644))
		set, err := Load(dir)
		require.NoError(t, err)
		assert.NoError(t, set.Templates()[0].StoreError())
	})
}
