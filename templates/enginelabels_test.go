package templates

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEngineLabelWarnings: a child's label that the engine sets itself is
// named at its line, with the template's value and why the engine's wins
// (issue 54: Timoni's #Metadata sets app.kubernetes.io/managed-by:
// "timoni", in the style of its examples/minimal module's
// templates/config.cue, and the children carried "engine" without a
// word); the engine's own value and other labels are not.
func TestEngineLabelWarnings(t *testing.T) {
	dir := t.TempDir()
	writeTemplate(t, dir, "minimal.cue", `parent: {apiVersion: "timoni.cuengine.dev/v1", kind: "Minimal", spec: message: *"Hello" | string}
#Metadata: {
	name: parent.metadata.name
	labels: {
		"app.kubernetes.io/name":       name
		"app.kubernetes.io/managed-by": "timoni"
	}
}
children: {
	config: {
		apiVersion: "v1"
		kind:       "ConfigMap"
		metadata: #Metadata
		data: message: parent.spec.message
	}
	own: {
		apiVersion: "v1"
		kind:       "ConfigMap"
		metadata: {name: "own", labels: {"app.kubernetes.io/managed-by": "engine", tier: "web"}}
	}
}
`)
	warnings := loadOne(t, dir).EngineLabelWarnings()
	require.Len(t, warnings, 1, "%q", warnings)
	assert.Equal(t, `t/minimal.cue:6:3: children.config.metadata.labels["app.kubernetes.io/managed-by"]: the template gives it "timoni", which the engine replaces on the child: it sets this label on every child to "engine": the engine's caches select its children by it`, warnings[0])
}
