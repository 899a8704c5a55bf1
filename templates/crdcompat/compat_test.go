package crdcompat

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/cuengine/engine/templates"
)

// loadMyKind returns the CRD of the example template mykind.
func loadMyKind(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	set, err := templates.Load("../../examples/templates")
	require.NoError(t, err)
	for _, tm := range set.Templates() {
		if tm.Name == "mykind" {
			return tm.CRD()
		}
	}
	t.Fatal("no template mykind in ../../examples/templates")
	return nil
}

func TestBreakingChanges(t *testing.T) {
	base := loadMyKind(t)
	assert.Empty(t, BreakingChanges(base, base.DeepCopy()))

	narrowed := base.DeepCopy()
	ten := int64(10)
	spec := narrowed.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	dn := spec.Properties["deploymentName"]
	dn.MaxLength = &ten
	spec.Properties["deploymentName"] = dn
	rep := spec.Properties["replicas"]
	rep.Type = "string"
	spec.Properties["replicas"] = rep
	narrowed.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	assert.Equal(t, []string{
		"v1.spec.deploymentName: maxLength narrows to 10",
		`v1.spec.replicas: type changes from "integer" to "string"`,
	}, BreakingChanges(base, narrowed))

	removed := base.DeepCopy()
	delete(removed.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties, "replicas")
	assert.Equal(t, []string{`v1.spec: field "replicas" is removed (stored values would be dropped)`}, BreakingChanges(base, removed))

	// Widening is safe: going back from narrowed only reports the type.
	assert.Equal(t, []string{`v1.spec.replicas: type changes from "string" to "integer"`}, BreakingChanges(narrowed, base))
}
