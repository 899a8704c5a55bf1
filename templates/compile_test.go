package templates

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// topLevelIf is a template whose child appears under a top-level if over
// the parent; the if is on line 10.
const topLevelIf = `package web

parent: {
	apiVersion: "example.com/v1"
	kind:       "Web"
	spec: {
		%s
	}
}
if %s {
	children: cm: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "m"}
}
`

// TestTopLevelIf: a top-level if over a parent field without a value when
// the template compiles is refused at the if, saying what to write; with a
// default it works.
func TestTopLevelIf(t *testing.T) {
	const advice = ": a top-level if is decided when the template compiles, before any parent exists, so it cannot read the parent's fields; put it inside the field it adds to, as in children: {%s {...}}, or give the fields it reads a default (as in enabled: *false | bool)"
	tests := []struct {
		name, decl, cond, want string
	}{
		{"optional field", "monitoring?: enabled?: bool", "parent.spec.monitoring.enabled",
			"web.cue:10:1: if parent.spec.monitoring.enabled" + fmt.Sprintf(advice, "if parent.spec.monitoring.enabled")},
		{"field without a default", "monitoring: enabled: bool", "parent.spec.monitoring.enabled",
			"web.cue:10:1: if parent.spec.monitoring.enabled" + fmt.Sprintf(advice, "if parent.spec.monitoring.enabled")},
		{"the parent's name", "monitoring: enabled: *false | bool", `parent.metadata.name == "x"`,
			`web.cue:10:1: if parent.metadata.name == "x"` + fmt.Sprintf(advice, `if parent.metadata.name == "x"`)},
		{"with a default", "monitoring: enabled: *false | bool", "parent.spec.monitoring.enabled", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "web.cue"), []byte(fmt.Sprintf(topLevelIf, tt.decl, tt.cond)))
			set, err := Load(dir)
			if tt.want != "" {
				require.Error(t, err)
				assert.Equal(t, tt.want, err.Error())
				return
			}
			require.NoError(t, err)
			tm := set.Templates()[0]
			for _, enabled := range []bool{false, true} {
				parent := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": "example.com/v1", "kind": "Web",
					"metadata": map[string]any{"name": "w", "namespace": "default", "uid": "u"},
					"spec":     map[string]any{"monitoring": map[string]any{"enabled": enabled}},
				}}
				res, err := tm.Evaluate(Input{Parent: parent})
				require.NoError(t, err)
				if enabled {
					assert.Len(t, res.Children, 1)
				} else {
					assert.Empty(t, res.Children)
				}
			}
		})
	}
}
