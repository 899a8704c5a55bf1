package openapi

import (
	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// maxDiscriminatorValues bounds the alternatives of one field a struct is
// filled with to find its conditional fields.
const maxDiscriminatorValues = 32

// conditionalFields adds to s, the schema of struct v, the fields v
// declares under an `if` that the compiled value does not show. A schema
// that varies by a discriminator field, as KubeVela's webservice volumes
// do:
//
//	type: *"emptyDir" | "pvc" | "configMap"
//	if type == "pvc" {claimName: string}
//
// evaluates with the default's branch only, so claimName would not be in
// the CRD and the apiserver would prune it from what a user writes. For
// each field of v whose value is a disjunction of concrete scalars, v is
// filled with each alternative in turn, and the fields that appear then
// are added as optional properties: their combination is CUE's to check,
// at admission. When the `if`s of v declare a field that no alternative
// shows (a condition on something other than such a field), v's object
// keeps the fields it does not declare: unsure, keep everything.
func conditionalFields(v cue.Value, s *apiextensionsv1.JSONSchemaProps) {
	declared := conditionalLabels(v)
	if len(declared) == 0 {
		return
	}
	missing := func() bool {
		for name := range declared {
			if _, ok := s.Properties[name]; !ok {
				return true
			}
		}
		return false
	}
	it, err := v.Fields(cue.Optional(true))
	if err != nil {
		return
	}
	for it.Next() && missing() {
		sel := it.Selector()
		if sel.IsDefinition() || sel.PkgPath() != "" {
			continue
		}
		for _, alt := range scalarAlternatives(it.Value()) {
			filled := v.FillPath(cue.MakePath(sel), alt)
			fit, err := filled.Fields(cue.Optional(true))
			if err != nil {
				continue // an alternative the struct refuses
			}
			for fit.Next() {
				name := fit.Selector().Unquoted()
				if _, ok := s.Properties[name]; ok || fit.Selector().IsDefinition() || fit.Selector().PkgPath() != "" {
					continue
				}
				if s.Properties == nil {
					s.Properties = map[string]apiextensionsv1.JSONSchemaProps{}
				}
				s.Properties[name] = SchemaOf(fit.Value()) // optional: not in Required
			}
		}
	}
	if missing() && s.AdditionalProperties == nil {
		s.XPreserveUnknownFields = ptr(true)
	}
}

// scalarAlternatives are the concrete scalar alternatives of a
// disjunction (`*"a" | "b" | "c"`), none for any other value.
func scalarAlternatives(v cue.Value) []cue.Value {
	op, args := v.Expr()
	if op != cue.OrOp || len(args) > maxDiscriminatorValues {
		return nil
	}
	for _, a := range args {
		if !a.IsConcrete() || a.IncompleteKind()&(cue.StructKind|cue.ListKind) != 0 {
			return nil
		}
	}
	return args
}

// conditionalLabels are the names of the fields v's syntax declares under
// an `if` (or another comprehension), at its top level; "" stands for
// what it cannot name (a computed label, an embedding).
func conditionalLabels(v cue.Value) map[string]bool {
	if root, path := v.ReferencePath(); len(path.Selectors()) > 0 {
		v = root.LookupPath(path) // `spec: parameter`: the struct it names
	}
	var decls []ast.Decl
	switch n := v.Source().(type) {
	case *ast.StructLit:
		decls = n.Elts
	case *ast.Field:
		if sl, ok := n.Value.(*ast.StructLit); ok {
			decls = sl.Elts
		}
	case *ast.File:
		decls = n.Decls
	}
	out := map[string]bool{}
	for _, d := range decls {
		c, ok := d.(*ast.Comprehension)
		if !ok {
			continue
		}
		body, ok := c.Value.(*ast.StructLit)
		if !ok {
			out[""] = true // a body the syntax cannot name the fields of
			continue
		}
		for _, e := range body.Elts {
			name := ""
			if f, ok := e.(*ast.Field); ok {
				name, _, _ = ast.LabelName(f.Label) // "" for `"\(k)": v`
			}
			out[name] = true // "": a field no alternative can show
		}
	}
	return out
}
