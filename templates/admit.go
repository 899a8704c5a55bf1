package templates

import (
	"fmt"
	"strings"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/templates/openapi"
)

// Admit checks a parent the way the apiserver checks a custom resource
// written against the CRD the template generates (CRD()), with the
// apiserver's own code: it drops the fields the schema does not declare,
// applies the schema's defaults and validates the result. It returns the
// object as it would be stored and the paths of the dropped fields.
//
// Evaluate prunes as well, since the engine only ever sees stored objects;
// what Admit adds is the CRD's validation, so that an object the apiserver
// would refuse is refused offline too (engine test). A refused object
// yields an *Error with one problem per field, its path under "parent".
func (t *Template) Admit(obj *unstructured.Unstructured) (_ *unstructured.Unstructured, _ []string, err error) {
	defer recovered(t.Path, "admitting "+obj.GetName(), &err)
	out := obj.DeepCopy()
	pruned := prune(out.Object, t.schema)
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(out.Object, t.schema)
	structuraldefaulting.Default(out.Object, t.schema)
	props, err := internalSchema(t.crd)
	if err != nil {
		return nil, nil, err
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(props)
	if err != nil {
		return nil, nil, fmt.Errorf("building the CRD validator: %w", err)
	}
	errs := apiservervalidation.ValidateCustomResource(nil, out.Object, validator)
	if len(errs) == 0 {
		return out, pruned, nil
	}
	refused := &Error{Template: t.Path}
	for _, fe := range errs {
		refused.Problems = append(refused.Problems, Problem{
			Path: "parent." + strings.TrimPrefix(fe.Field, "<nil>."),
			Msg:  "refused by the CRD schema, as the apiserver would refuse it: " + fe.ErrorBody(),
		})
	}
	return nil, pruned, refused
}

// internalSchema converts the CRD's schema into the apiserver's internal form.
func internalSchema(crd *apiextensionsv1.CustomResourceDefinition) (*apiextensionsinternal.JSONSchemaProps, error) {
	var internal apiextensionsinternal.JSONSchemaProps
	props := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(props, &internal, nil); err != nil {
		return nil, err
	}
	return &internal, nil
}

// Constraints returns the constraints of the parent's spec that the CRD
// does not carry, in the order of the spec's fields (openapi.Constraints).
func (t *Template) Constraints() []openapi.Constraint { return t.constraints }

// NeedsAdmission reports whether the template's parents need the engine's
// validating webhook: their spec has constraints the CRD does not carry,
// or the kind has several versions, so that an object written in one that
// does not convert to the hub is refused at its write rather than stored
// (where it would fail every list of the kind in the hub).
func (t *Template) NeedsAdmission() bool { return len(t.constraints) > 0 || t.Converts() }
