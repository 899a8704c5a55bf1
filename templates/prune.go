package templates

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// structural converts the CRD's schema into the apiserver's structural form
// and checks that it is structural, as the apiserver would on create.
func structural(crd *apiextensionsv1.CustomResourceDefinition) (*structuralschema.Structural, error) {
	internal, err := internalSchema(crd)
	if err != nil {
		return nil, err
	}
	s, err := structuralschema.NewStructural(internal)
	if err != nil {
		return nil, err
	}
	if errs := structuralschema.ValidateStructural(field.NewPath("openAPIV3Schema"), s); len(errs) > 0 {
		return nil, fmt.Errorf("%v", errs.ToAggregate())
	}
	return s, nil
}

// prune drops the fields of obj that the schema does not declare, exactly as
// the apiserver does on write, and returns their paths.
func prune(obj map[string]any, s *structuralschema.Structural) []string {
	return pruning.PruneWithOptions(obj, s, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
}
