package templates

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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

// TestConstraintUnderAnIfWithACall is issue 51's template: an `if` whose
// condition calls a function of the spec's own field. It compiled into a
// panic in cue/format (the constraint's text of a bare comprehension) and
// took every replica down at reload. It compiles, its CRD types the fields
// outside the `if` and keeps what the `if` may add, the `if` is left to the
// admission webhook, and ValidateParent (what the webhook runs) refuses
// what it forbids.
func TestConstraintUnderAnIfWithACall(t *testing.T) {
	tmpl := loadSpec(t, `import "strings"`, `
	image:    string
	replicas: int & >=0
	if strings.HasSuffix(image, ":dev") {replicas: <=10}`)
	assert.Equal(t, []openapi.Constraint{{Pos: "w.cue:10:2", Path: "spec", What: `if strings.HasSuffix(image, ":dev") {replicas: <=10}`}}, tmpl.Constraints())
	assert.True(t, tmpl.NeedsAdmission())

	spec := tmpl.CRD().Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	assert.Equal(t, "object", spec.Type)
	assert.Equal(t, []string{"image", "replicas"}, spec.Required)
	assert.Equal(t, "integer", spec.Properties["replicas"].Type)
	require.NotNil(t, spec.Properties["replicas"].Minimum)
	assert.Zero(t, *spec.Properties["replicas"].Minimum)
	require.NotNil(t, spec.XPreserveUnknownFields, "what the `if` adds is known only with the parent")
	assert.True(t, *spec.XPreserveUnknownFields)

	parent := func(image string, replicas int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "x.dev/v1", "kind": "W", "metadata": map[string]any{"name": "w", "namespace": "default"},
			"spec": map[string]any{"image": image, "replicas": replicas},
		}}
	}
	require.NoError(t, tmpl.ValidateParent(parent("web:1.0", 50)))
	require.NoError(t, tmpl.ValidateParent(parent("web:dev", 5)))
	err := tmpl.ValidateParent(parent("web:dev", 50))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "parent.spec.replicas: invalid value 50 (out of bound <=10)")
}
