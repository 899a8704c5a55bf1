package templates

import (
	"regexp"
	"strings"

	"cuelang.org/go/cue"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/cuengine/engine/templates/openapi"
)

// attrImmutable marks a spec field that cannot change once set:
// `region: string @immutable()`.
const attrImmutable = "immutable"

// celIdent is a field name CEL can select without escaping.
var celIdent = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// immutable turns the @immutable() fields of parent.spec into the CRD's
// own validation rules, which the apiserver checks on every update without
// calling the engine: `self == oldSelf` on the field, and on an optional
// field `!has(oldSelf.f) || has(self.f)` on its struct, so that once set it
// can be neither changed nor removed.
func (c *compiler) immutable(tmpl string, sv cue.Value, spec *apiextensionsv1.JSONSchemaProps) error {
	return c.immutableFields(tmpl, sv, spec, "spec", false)
}

func (c *compiler) immutableFields(tmpl string, v cue.Value, s *apiextensionsv1.JSONSchemaProps, path string, inList bool) error {
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
				return c.problemf(tmpl, fv, "parent."+fieldPath, "@immutable() takes no arguments")
			case inList:
				return c.problemf(tmpl, fv, "parent."+fieldPath, "@immutable() cannot apply inside a list: the apiserver cannot pair a list's old and new items")
			case !celIdent.MatchString(name):
				return c.problemf(tmpl, fv, "parent."+fieldPath, "@immutable() needs a field name of letters, digits and _")
			}
			prop.XValidations = append(prop.XValidations, apiextensionsv1.ValidationRule{Rule: "self == oldSelf", Message: fieldPath + " is immutable"})
			if !openapi.IsRequired(it, fv) {
				s.XValidations = append(s.XValidations, apiextensionsv1.ValidationRule{
					Rule:    "!has(oldSelf." + name + ") || has(self." + name + ")",
					Message: fieldPath + " is immutable: once set it cannot be removed",
				})
			}
		}
		if err := c.immutableValue(tmpl, fv, &prop, fieldPath, inList); err != nil {
			return err
		}
		s.Properties[name] = prop
	}
	return nil
}

// immutableValue looks for @immutable() below a field: in a struct, in a
// map's values and in a list's items (where it is refused).
func (c *compiler) immutableValue(tmpl string, v cue.Value, s *apiextensionsv1.JSONSchemaProps, path string, inList bool) error {
	if s.Items != nil && s.Items.Schema != nil {
		if elem := v.LookupPath(cue.MakePath(cue.AnyIndex)); elem.Exists() {
			return c.immutableFields(tmpl, elem, s.Items.Schema, path+"[]", true)
		}
		return nil
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		if elem := v.LookupPath(cue.MakePath(cue.AnyString)); elem.Exists() {
			if err := c.immutableFields(tmpl, elem, s.AdditionalProperties.Schema, path+".*", inList); err != nil {
				return err
			}
		}
	}
	return c.immutableFields(tmpl, v, s, path, inList)
}
