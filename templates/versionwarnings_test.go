package templates

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVersionWarnings: issue 53's kind, v1 with replicas unbounded and the
// hub v2 bounded to 10 (cmd/engine/testdata/conversion, the template the
// cluster tests store a v1 App of 20 replicas with), is warned at v1's
// field with a value that does not convert; a nested field under an
// optional struct and a string bound are found too; fields that agree,
// and examples/versions (the same bounds in both versions), are not.
func TestVersionWarnings(t *testing.T) {
	t.Run("the conversion test template", func(t *testing.T) {
		dir := t.TempDir()
		src, err := os.ReadFile("../cmd/engine/testdata/conversion/app.cue")
		require.NoError(t, err)
		writeTemplate(t, dir, "app.cue", string(src))
		warnings := loadOne(t, dir).VersionWarnings()
		require.Len(t, warnings, 1, "%q", warnings)
		assert.Equal(t, "t/app.cue:29:4: versions.v1.spec.replicas: v1 admits 11, which does not convert to the hub v2: "+
			"t/app.cue:18:30: spec.container.replicas: invalid value 11 (out of bound <=10); "+
			"the engine's admission webhook refuses such a write, and an object stored so is Stalled on its own", warnings[0])
	})

	t.Run("nested and string bounds", func(t *testing.T) {
		dir := t.TempDir()
		writeTemplate(t, dir, "site.cue", `import "strings"

parent: {
	apiVersion: "test.cuengine.dev/v2"
	kind:       "Site"
	spec: {
		name: string & =~"^[a-z]+$"
		size: *1 | int & >=1
		tls?: {secret: string & strings.MaxRunes(63), port: *443 | int}
	}
}
versions: {
	v2: storage: true
	v1: {
		spec: {
			name: string
			size: *1 | int & >=1
			tls?: {secret: string, port: *443 | int}
		}
		toHub: {in: _, out: spec: in.spec}
		fromHub: {in: _, out: spec: in.spec}
	}
}
`)
		warnings := loadOne(t, dir).VersionWarnings()
		require.Len(t, warnings, 2, "%q", warnings)
		assert.Contains(t, warnings[0], `versions.v1.spec.name: v1 admits "", which does not convert to the hub v2`)
		assert.Contains(t, warnings[1], `versions.v1.spec.tls.secret: v1 admits "`+strings64+`", which does not convert to the hub v2`)
	})

	t.Run("examples/versions", func(t *testing.T) {
		dir := t.TempDir()
		src, err := os.ReadFile("../examples/versions/templates/app.cue")
		require.NoError(t, err)
		writeTemplate(t, dir, "app.cue", string(src))
		assert.Empty(t, loadOne(t, dir).VersionWarnings())
	})
}

var strings64 = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
