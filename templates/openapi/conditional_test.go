package openapi

import (
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kubevelaParameter is the volumes parameter of KubeVela's webservice
// component (kubevela/kubevela at 5a44b5f10c59,
// vela-templates/definitions/internal/component/webservice.cue, Apache-2.0),
// trimmed to its structure: the fields of each volume type under an `if`
// on the volume's type.
const kubevelaParameter = `
parameter: {
	image: string
	volumes?: [...{
		name:      string
		mountPath: string
		// +usage=Specify volume type, options: "pvc","configMap","secret","emptyDir", default to emptyDir
		type: *"emptyDir" | "pvc" | "configMap" | "secret"
		if type == "pvc" {
			claimName: string
		}
		if type == "configMap" {
			defaultMode: *420 | int
			cmName:      string
			items?: [...{
				key:  string
				path: string
				mode: *511 | int
			}]
		}
		if type == "secret" {
			defaultMode: *420 | int
			secretName:  string
		}
		if type == "emptyDir" {
			medium: *"" | "Memory"
		}
	}]
	mode: *"plain" | "tuned"
	if mode == "tuned" {
		tuning?: {level: int & >=1 & <=5}
	}
	if len(image) > 40 {
		note?: string
	}
}
parent: spec: parameter
`

// TestConditionalFieldsReachTheSchema: every field declared under an `if`
// on a discriminator is in the schema, optional (issue 54: a pvc volume's
// claimName was pruned by the apiserver, the CRD derived from the default
// branch only); a struct whose `if` is on something else keeps what it
// is given.
func TestConditionalFieldsReachTheSchema(t *testing.T) {
	v := cuecontext.New().CompileString(kubevelaParameter)
	require.NoError(t, v.Err())
	s := SchemaOf(v.LookupPath(cue.ParsePath("parent.spec")))
	vol := s.Properties["volumes"].Items.Schema
	require.NotNil(t, vol)
	for _, name := range []string{"name", "mountPath", "type", "claimName", "defaultMode", "cmName", "items", "secretName", "medium"} {
		assert.Contains(t, vol.Properties, name)
	}
	assert.Equal(t, "string", vol.Properties["claimName"].Type)
	assert.Equal(t, "integer", vol.Properties["defaultMode"].Type)
	assert.Equal(t, "array", vol.Properties["items"].Type)
	assert.Contains(t, vol.Properties["items"].Items.Schema.Properties, "path")
	assert.ElementsMatch(t, []string{"name", "mountPath"}, vol.Required, "what an `if` adds is not required")
	assert.Nil(t, vol.XPreserveUnknownFields, "every conditional field named: nothing else kept")

	assert.Contains(t, s.Properties, "tuning")
	assert.Equal(t, "integer", s.Properties["tuning"].Properties["level"].Type)
	assert.NotContains(t, s.Properties, "note", "an `if` on a length names no alternative")
	require.NotNil(t, s.XPreserveUnknownFields, "so the spec keeps what it is given, for CUE to check")
	assert.True(t, *s.XPreserveUnknownFields)
}
