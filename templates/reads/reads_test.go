package reads

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestParentReads: what a template reads or declares of the parent's
// metadata and status, or that it cannot tell (all).
func TestParentReads(t *testing.T) {
	tests := []struct {
		name, src string
		all       bool
		metadata  [][]string // nil: not read
		status    [][]string
	}{
		{"spec only", `parent: spec: x: int`, false, nil, nil},
		{"a read", `y: parent.metadata.name`, false, [][]string{{"name"}}, nil},
		{"in an interpolated label", `children: "\(parent.metadata.labels.app)-cm": {}`, false, [][]string{{"labels", "app"}}, nil},
		{"in a comprehension", `for k, v in parent.status.items {z: (k): v}`, false, nil, [][]string{{"items"}}},
		{"declared metadata", `parent: metadata: name: =~"^a"`, false, [][]string{{}}, nil},
		{"declared in a top-level comprehension", `if true {parent: status: x: int}`, false, nil, [][]string{{}}},
		{"a whole part", `y: parent.metadata`, false, [][]string{{}}, nil},
		{"parent itself", `y: parent`, true, nil, nil},
		{"through a let", "let p = parent\ny: p.metadata.name", true, nil, nil},
		{"through a label alias", "P=parent: spec: x: int\ny: P.metadata.name", true, nil, nil},
		{"from a definition", "#P: metadata: name: string\nparent: #P", true, nil, nil},
		{"an embedding", "_base\n_base: {}", true, nil, nil},
		{"a pattern label", `[string]: metadata: name: string`, true, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "t.cue")
			require.NoError(t, os.WriteFile(f, []byte(tc.src), 0o644))
			parent, _ := Of([]string{f})
			assert.Equal(t, tc.all, parent.All)
			if tc.all {
				return
			}
			assert.Equal(t, tc.metadata, parent.Paths["metadata"])
			assert.Equal(t, tc.status, parent.Paths["status"])
		})
	}
}

// TestTopLevelOf: the top-level fields a template declares, including in
// top-level comprehensions, or nil when the syntax cannot tell.
func TestTopLevel(t *testing.T) {
	tests := []struct {
		name, src string
		want      map[string]bool
	}{
		{"plain", "parent: kind: \"K\"\nchildren: {}", map[string]bool{"parent": true, "children": true}},
		{"in a comprehension", "if true {for x in [1] {resources: a: {}}}\nready: true", map[string]bool{"resources": true, "ready": true}},
		{"an alias", "R=resources: {}", map[string]bool{"resources": true}},
		{"an embedding", "_base\n_base: {}", nil},
		{"a dynamic label", "(\"re\" + \"ady\"): true", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "t.cue")
			require.NoError(t, os.WriteFile(f, []byte(tc.src), 0o644))
			assert.Equal(t, tc.want, TopLevel([]string{f}))
		})
	}
}
