package templates

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A struct default beside an open map merges with what the user gives
// (kro's CoreDNS example ported literally keeps the default labels beside
// the team's): vet says so; a closed default, which the user's value
// replaces, is silent.
func TestDefaultWarnings(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "t.cue"), []byte(`parent: {
	apiVersion: "x.dev/v1"
	kind:       "Cl"
	spec: {
		labels:      *{a: "1"} | {[string]: string}
		annotations: *close({a: "1"}) | {[string]: string}
		nested: tags: *{b: "2"} | {[string]: string}
		name: *"x" | string
	}
}
children: cm: {apiVersion: "v1", kind: "ConfigMap", metadata: {name: "x", labels: parent.spec.labels}}
`), 0o644))
	set, err := Load(dir)
	require.NoError(t, err)
	tpl := set.Templates()[0]
	assert.Equal(t, []string{
		"t.cue:5:3: parent.spec.labels: the default is an open struct, so CUE merges a value the user gives into it and the default's keys stay beside the user's; write *close({...}) | ... for a default the user's value replaces",
		"t.cue:7:11: parent.spec.nested.tags: the default is an open struct, so CUE merges a value the user gives into it and the default's keys stay beside the user's; write *close({...}) | ... for a default the user's value replaces",
	}, tpl.DefaultWarnings())
}
