package openapi

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// TestImmutable: an @immutable() field gets its rule on the schema
// SchemaOf made, an optional one a second rule on its struct; one that
// cannot hold is a FieldError at the field's value and path (the templates
// package reports it under parent., templates/immutable_test.go).
func TestImmutable(t *testing.T) {
	spec, _, _ := compileSpec(t, "", `
		region: string @immutable()
		storage: class?: string @immutable()`)
	s := SchemaOf(spec)
	require.Nil(t, Immutable(spec, &s))
	assert.Equal(t, apiextensionsv1.ValidationRules{{Rule: "self == oldSelf", Message: "spec.region is immutable"}},
		s.Properties["region"].XValidations)
	assert.Equal(t, apiextensionsv1.ValidationRules{{Rule: "!has(oldSelf.class) || has(self.class)", Message: "spec.storage.class is immutable: once set it cannot be removed"}},
		s.Properties["storage"].XValidations)

	spec, _, pos := compileSpec(t, "", `
		ports: [...{port: int @immutable()}]`)
	s = SchemaOf(spec)
	fe := Immutable(spec, &s)
	require.NotNil(t, fe)
	assert.Equal(t, "spec.ports[].port", fe.Path)
	assert.Equal(t, "@immutable() cannot apply inside a list: the apiserver cannot pair a list's old and new items", fe.Msg)
	assert.Equal(t, "w.cue:8:15", pos(fe.Value.Pos()))
}
