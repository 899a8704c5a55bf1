package openapi

import (
	"regexp"
	"strings"

	"cuelang.org/go/cue"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// attrImmutable marks a spec field that cannot change once set:
// `region: string @immutable()`.
const attrImmutable = "immutable"

// celIdent is a field name CEL can select without escaping.
var celIdent = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// FieldError is a field of parent.spec the conversion refuses: what is
// wrong (Msg) with the field at Path ("spec.region"), whose value is Value
// (for its position).
type FieldError struct {
	Value cue.Value
	Path  string
	Msg   string
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Msg }

// Immutable turns the @immutable() fields of spec (the value of
// parent.spec) into validation rules of its schema s (SchemaOf's), which
// the apiserver checks on every update without calling the engine:
// `self == oldSelf` on the field, and on an optional field
// `!has(oldSelf.f) || has(self.f)` on its struct, so that once set it can
// be neither changed nor removed. An @immutable() that cannot hold (with
// arguments, inside a list, on a name CEL cannot select) is a FieldError.
func Immutable(spec cue.Value, s *apiextensionsv1.JSONSchemaProps) *FieldError {
	return immutableFields(spec, s, "spec", false)
}

func immutableFields(v cue.Value, s *apiextensionsv1.JSONSchemaProps, path string, inList bool) *FieldError {
	if v.IncompleteKind()&cue.StructKind == 0 {
		return nil
	}
	it, err := v.Fields(cue.Optional(true))
	if err != nil {
		return nil // the CRD's schema has the same view of it
	}
	for it.Next() {
		sel := it.Selector()
		if sel.IsDefinition() || sel.PkgPath() != "" {
			continue
		}
		name, fv := sel.Unquoted(), it.Value()
		prop, ok := s.Properties[name]
		if !ok {
			continue
		}
		fieldPath := path + "." + name
		if attr := fv.Attribute(attrImmutable); attr.Err() == nil {
			switch {
			case strings.TrimSpace(attr.Contents()) != "":
				return &FieldError{Value: fv, Path: fieldPath, Msg: "@immutable() takes no arguments"}
			case inList:
				return &FieldError{Value: fv, Path: fieldPath, Msg: "@immutable() cannot apply inside a list: the apiserver cannot pair a list's old and new items"}
			case !celIdent.MatchString(name):
				return &FieldError{Value: fv, Path: fieldPath, Msg: "@immutable() needs a field name of letters, digits and _"}
			}
			prop.XValidations = append(prop.XValidations, apiextensionsv1.ValidationRule{Rule: "self == oldSelf", Message: fieldPath + " is immutable"})
			if !isRequired(it, fv) {
				s.XValidations = append(s.XValidations, apiextensionsv1.ValidationRule{
					Rule:    "!has(oldSelf." + name + ") || has(self." + name + ")",
					Message: fieldPath + " is immutable: once set it cannot be removed",
				})
			}
		}
		if err := immutableValue(fv, &prop, fieldPath, inList); err != nil {
			return err
		}
		s.Properties[name] = prop
	}
	return nil
}

// immutableValue looks for @immutable() below a field: in a struct, in a
// map's values and in a list's items (where it is refused).
func immutableValue(v cue.Value, s *apiextensionsv1.JSONSchemaProps, path string, inList bool) *FieldError {
	if s.Items != nil && s.Items.Schema != nil {
		if elem := v.LookupPath(cue.MakePath(cue.AnyIndex)); elem.Exists() {
			return immutableFields(elem, s.Items.Schema, path+"[]", true)
		}
		return nil
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		if elem := v.LookupPath(cue.MakePath(cue.AnyString)); elem.Exists() {
			if err := immutableFields(elem, s.AdditionalProperties.Schema, path+".*", inList); err != nil {
				return err
			}
		}
	}
	return immutableFields(v, s, path, inList)
}
