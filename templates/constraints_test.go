package templates

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cuengine/engine/templates/openapi"
)

// loadSpec compiles one template whose parent.spec is spec.
func loadSpec(t *testing.T, imports, spec string) *Template {
	t.Helper()
	dir := t.TempDir()
	src := "package w\n" + imports + "\nparent: {\n\tapiVersion: \"x.dev/v1\"\n\tkind: \"W\"\n\tspec: {\n" + spec + "\n\t}\n}\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "w.cue"), []byte(src), 0o644))
	set, err := Load(dir)
	require.NoError(t, err)
	return set.Templates()[0]
}

// TestConstraintsReachTheTemplate: a compiled template carries what
// openapi.Constraints finds in its spec (templates/openapi tests the walk
// case by case), with positions in the templates directory, and needs the
// admission webhook exactly when it finds any.
func TestConstraintsReachTheTemplate(t *testing.T) {
	tmpl := loadSpec(t, "", `
		minReplicas: *1 | int & >=0
		replicas: *2 | int & >=minReplicas & <=10`)
	assert.Equal(t, []openapi.Constraint{{Pos: "w.cue:9:3", Path: "spec.replicas", What: ">=minReplicas"}}, tmpl.Constraints())
	assert.True(t, tmpl.NeedsAdmission())

	tmpl = loadSpec(t, `import "strings"`, `
		replicas: *1 | int32 & >=0 & <=10
		name: string & strings.MaxRunes(63)`)
	assert.Empty(t, tmpl.Constraints())
	assert.False(t, tmpl.NeedsAdmission())
}
