package openapi

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/token"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// schemaOf derives a structural OpenAPI v3 schema from a CUE value. It walks
// the value itself rather than using cuelang.org/go/encoding/openapi, which
// only encodes definitions and cannot encode a default on a bounded number
// (the MyKind example's own `replicas: *1 | int32 & >=0`).
//
// Structs become objects with properties and required fields; lists become
// arrays; scalars get their type, bounds, lengths, patterns, enums, formats
// and defaults. A value whose kind CUE leaves open (a reference to observed
// state, `_`) keeps whatever it holds via x-kubernetes-preserve-unknown-fields.
func SchemaOf(v cue.Value) apiextensionsv1.JSONSchemaProps {
	kind := v.IncompleteKind() &^ cue.BottomKind
	def, hasDef := v.Default()
	if hasDef && !def.IsConcrete() {
		hasDef = false
	}
	if (kind == cue.TopKind || kind == 0) && hasDef {
		// A default like `*observed.x.y | 0` says what type the field has.
		kind = def.IncompleteKind()
	}
	nullable := kind&cue.NullKind != 0 && kind != cue.NullKind && kind != cue.TopKind
	if nullable {
		kind &^= cue.NullKind
	}
	if hasDef && kind == cue.ListKind && isEmptyList(def) {
		hasDef = false // `[...T]` defaults to `[]` in CUE: not worth a CRD default
	}
	if hasDef && (kind == cue.StructKind || kind == cue.ListKind) {
		return withDefault(v, def)
	}
	undecided := kind == 0 && undecidedStruct(v)
	if undecided {
		kind = cue.StructKind
	}
	var s apiextensionsv1.JSONSchemaProps
	switch kind {
	case cue.StructKind:
		s = structSchema(v)
		if undecided && s.AdditionalProperties == nil {
			// What the `if` adds is known only with the parent: the
			// CRD keeps it, the admission webhook checks it
			// (Constraints reports the `if`).
			s.XPreserveUnknownFields = ptr(true)
		}
	case cue.ListKind:
		s = listSchema(v)
	case cue.StringKind:
		s.Type = "string"
	case cue.IntKind:
		s.Type = "integer"
	case cue.FloatKind, cue.NumberKind:
		s.Type = "number"
	case cue.BoolKind:
		s.Type = "boolean"
	case cue.IntKind | cue.StringKind:
		s.XIntOrString = true
	default:
		return apiextensionsv1.JSONSchemaProps{XPreserveUnknownFields: ptr(true)}
	}
	s.Nullable = nullable
	if kind&(cue.StringKind|cue.NumberKind) != 0 && kind&^(cue.StringKind|cue.NumberKind) == 0 {
		constrain(&s, scalarSyntax(v))
		numberFormat(&s)
	}
	if hasDef && kind != cue.StructKind && kind != cue.ListKind {
		if b, err := def.MarshalJSON(); err == nil {
			s.Default = &apiextensionsv1.JSON{Raw: b}
		}
	}
	if doc := docOf(v); doc != "" {
		s.Description = doc
	}
	return s
}

// withDefault is the schema of a struct or list with a default, such as
// `*{app: "x"} | {[string]: string}` or `*["a"] | [...string]`: the schema
// of what the field accepts (the alternatives that are not the default; the
// map stays open, the list keeps its items) with the default as the CRD's
// default. The schema of the default alone would drop every other value.
func withDefault(v, def cue.Value) apiextensionsv1.JSONSchemaProps {
	var s apiextensionsv1.JSONSchemaProps
	op, alts := v.Expr()
	if op == cue.OrOp {
		// The default is one of the alternatives; what else the field
		// accepts is the others.
		alts = slices.DeleteFunc(slices.Clone(alts), func(a cue.Value) bool { return a.Equals(def) })
	}
	switch {
	case len(alts) == 1 && (op == cue.NoOp || op == cue.OrOp):
		s = schemaWithoutDefault(alts[0])
	case op == cue.OrOp && len(alts) > 1:
		s = unionSchema(alts)
	default:
		s = apiextensionsv1.JSONSchemaProps{XPreserveUnknownFields: ptr(true)}
	}
	if b, err := def.MarshalJSON(); err == nil && def.Validate(cue.Concrete(true)) == nil {
		s.Default = &apiextensionsv1.JSON{Raw: b}
	}
	if doc := docOf(v); doc != "" {
		s.Description = doc
	}
	return s
}

// schemaWithoutDefault is the schema of an alternative of a disjunction
// with a default, itself without one.
func schemaWithoutDefault(a cue.Value) apiextensionsv1.JSONSchemaProps {
	if !hasDefault(a) {
		return SchemaOf(a)
	}
	switch a.IncompleteKind() &^ cue.BottomKind {
	case cue.StructKind:
		return structSchema(a)
	case cue.ListKind:
		return listSchema(a)
	}
	return apiextensionsv1.JSONSchemaProps{XPreserveUnknownFields: ptr(true)}
}

func isEmptyList(v cue.Value) bool {
	n, err := v.Len().Int64()
	return err == nil && n == 0
}

func hasDefault(v cue.Value) bool {
	_, ok := v.Default()
	return ok
}

// unionSchema is a schema that accepts each alternative of a disjunction
// of structs (the union of their fields, none required) or of lists; any
// other mix keeps whatever it is given.
func unionSchema(alts []cue.Value) apiextensionsv1.JSONSchemaProps {
	keep := apiextensionsv1.JSONSchemaProps{XPreserveUnknownFields: ptr(true)}
	var out apiextensionsv1.JSONSchemaProps
	for i, a := range alts {
		s := schemaWithoutDefault(a)
		switch {
		case s.Type != "object" && s.Type != "array":
			return keep
		case i == 0:
			out = s
			out.Required = nil
		case s.Type != out.Type:
			return keep
		case s.Type == "array":
			if !equalSchema(s, out) {
				return keep
			}
		default:
			for name, p := range s.Properties {
				if q, ok := out.Properties[name]; ok && !equalSchema(p, q) {
					return keep
				}
				if out.Properties == nil {
					out.Properties = map[string]apiextensionsv1.JSONSchemaProps{}
				}
				out.Properties[name] = p
			}
			if s.AdditionalProperties != nil || s.XPreserveUnknownFields != nil {
				if out.AdditionalProperties == nil && s.AdditionalProperties != nil {
					out.AdditionalProperties = s.AdditionalProperties
				}
				if s.XPreserveUnknownFields != nil {
					out.XPreserveUnknownFields = ptr(true)
				}
			}
		}
	}
	return out
}

func equalSchema(a, b apiextensionsv1.JSONSchemaProps) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

func structSchema(v cue.Value) apiextensionsv1.JSONSchemaProps {
	s := apiextensionsv1.JSONSchemaProps{Type: "object"}
	it, err := v.Fields(cue.Optional(true))
	if err == nil {
		for it.Next() {
			if it.Selector().IsDefinition() || it.Selector().PkgPath() != "" {
				continue
			}
			name := it.Selector().Unquoted()
			fv := it.Value()
			if s.Properties == nil {
				s.Properties = map[string]apiextensionsv1.JSONSchemaProps{}
			}
			s.Properties[name] = SchemaOf(fv)
			if isRequired(it, fv) {
				s.Required = append(s.Required, name)
			}
		}
	}
	if elem := v.LookupPath(cue.MakePath(cue.AnyString)); elem.Exists() {
		es := SchemaOf(elem)
		s.AdditionalProperties = &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &es}
	}
	conditionalFields(v, &s) // conditional.go
	if s.Properties == nil && s.AdditionalProperties == nil {
		// An open struct with nothing declared keeps what it is given.
		s.XPreserveUnknownFields = ptr(true)
	}
	return s
}

// isRequired: a field is required when it is regular (or marked `!`), has no
// default and, for a struct, requires something itself. Optional fields (`?`)
// and defaulted ones are not.
func isRequired(it *cue.Iterator, v cue.Value) bool {
	if it.IsOptional() {
		return false
	}
	if _, ok := v.Default(); ok {
		return false
	}
	if v.IsConcrete() && v.IncompleteKind() != cue.StructKind {
		return false
	}
	if v.IncompleteKind() == cue.StructKind {
		sub, err := v.Fields(cue.Optional(true))
		if err != nil {
			return false
		}
		for sub.Next() {
			if isRequired(sub, sub.Value()) {
				return true
			}
		}
		return false
	}
	return true
}

func listSchema(v cue.Value) apiextensionsv1.JSONSchemaProps {
	s := apiextensionsv1.JSONSchemaProps{Type: "array"}
	if elem := v.LookupPath(cue.MakePath(cue.AnyIndex)); elem.Exists() {
		es := SchemaOf(elem)
		s.Items = &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &es}
	} else {
		s.Items = &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{XPreserveUnknownFields: ptr(true)}}
	}
	return s
}

// scalarSyntax is the syntax of a scalar's value that constrain and the
// constraint walk read. A field whose whole value is a definition, as a
// Kubebuilder enum type becomes (`concurrencyPolicy?: #ConcurrencyPolicy`),
// reads as the definition's value (a chain of them, up to a bound): its
// enum or bounds go to the CRD like a literal's.
// undecidedStruct reports a struct that CUE cannot finish without the
// parent: an `if` on one of its own fields (`if image == "x:dev" {...}`,
// `if strings.HasSuffix(image, ":dev") {...}`) leaves it incomplete, of
// kind bottom, while the fields outside the `if` are known. Without this
// the whole struct would be read as unknown and the CRD would keep any
// value there, checking none of its fields.
func undecidedStruct(v cue.Value) bool {
	if v.IncompleteKind() != cue.BottomKind {
		return false
	}
	if v.Validate() != nil {
		return false // a real error, not one waiting for the parent
	}
	switch n := v.Syntax(cue.Raw()).(type) {
	case *ast.StructLit:
		return true
	case *ast.Ident, *ast.SelectorExpr:
		// A reference to a struct (`parent: spec: parameter`, as a
		// KubeVela definition's glue gives it): the struct it names.
		if root, path := v.ReferencePath(); len(path.Selectors()) > 0 {
			_, isStruct := root.LookupPath(path).Syntax(cue.Raw()).(*ast.StructLit)
			return isStruct
		}
	case *ast.File:
		for _, d := range n.Decls {
			switch d.(type) {
			case *ast.Field, *ast.Comprehension:
				return true
			}
		}
	}
	return false
}

func scalarSyntax(v cue.Value) ast.Node {
	n := v.Syntax(cue.Raw())
	for range 8 {
		id, ok := n.(*ast.Ident)
		if !ok || !strings.HasPrefix(id.Name, "#") {
			return n
		}
		root, p := v.ReferencePath()
		if len(p.Selectors()) == 0 {
			return n
		}
		d := root.LookupPath(p)
		if !d.Exists() {
			return n
		}
		v, n = d, d.Syntax(cue.Raw())
	}
	return n
}

// constrain reads bounds, lengths, patterns and enums from a scalar's syntax.
func constrain(s *apiextensionsv1.JSONSchemaProps, n ast.Node) {
	switch x := n.(type) {
	case *ast.File: // a value using a builtin package comes with its imports
		for _, d := range x.Decls {
			constrain(s, d)
		}
	case *ast.EmbedDecl:
		constrain(s, x.Expr)
	case *ast.StructLit: // `{ string }`: an embedded scalar
		for _, d := range x.Elts {
			if e, ok := d.(*ast.EmbedDecl); ok {
				constrain(s, e)
			}
		}
	case *ast.ParenExpr:
		constrain(s, x.X)
	case *ast.BinaryExpr:
		switch x.Op {
		case token.AND:
			constrain(s, x.X)
			constrain(s, x.Y)
		case token.OR:
			constrainDisjunction(s, x)
		}
	case *ast.UnaryExpr:
		constrainBound(s, x)
	case *ast.Ident:
		constrainType(s, x)
	case *ast.CallExpr:
		constrainLength(s, x)
	}
}

// constrainDisjunction reads an enum from a disjunction of literals, or the
// constraints of the one alternative that is not a literal.
func constrainDisjunction(s *apiextensionsv1.JSONSchemaProps, x *ast.BinaryExpr) {
	var lits, others []ast.Expr
	for _, a := range disjuncts(x, nil) {
		if u, ok := a.(*ast.UnaryExpr); ok && u.Op == token.MUL {
			a = u.X // the default; it is also one of the allowed values
		}
		if _, ok := a.(*ast.BasicLit); ok {
			lits = append(lits, a)
		} else {
			others = append(others, a)
		}
	}
	switch {
	case len(others) == 0:
		for _, l := range lits {
			if raw, ok := literalJSON(l.(*ast.BasicLit)); ok {
				s.Enum = append(s.Enum, apiextensionsv1.JSON{Raw: raw})
			}
		}
	case len(others) == 1:
		// `*1 | int32 & >=0`: the literal is only the default.
		constrain(s, others[0])
	}
}

// constrainBound reads a bound (`>=0`, `<10`) or a pattern (`=~"^a"`).
func constrainBound(s *apiextensionsv1.JSONSchemaProps, x *ast.UnaryExpr) {
	lit, ok := x.X.(*ast.BasicLit)
	if !ok {
		return
	}
	switch x.Op {
	case token.GEQ, token.GTR: // several bounds: the tightest wins
		if f, ok := number(lit); ok && (s.Minimum == nil || f > *s.Minimum) {
			s.Minimum = &f
			s.ExclusiveMinimum = x.Op == token.GTR
		}
	case token.LEQ, token.LSS:
		if f, ok := number(lit); ok && (s.Maximum == nil || f < *s.Maximum) {
			s.Maximum = &f
			s.ExclusiveMaximum = x.Op == token.LSS
		}
	case token.MAT:
		if str, err := strconv.Unquote(lit.Value); err == nil {
			s.Pattern = str
		}
	}
}

// constrainType reads what a numeric type implies: a minimum of 0 for the
// unsigned types, the format of int32 and int64.
func constrainType(s *apiextensionsv1.JSONSchemaProps, x *ast.Ident) {
	switch x.Name {
	case "uint", "uint8", "uint16", "uint32", "uint64":
		if zero := 0.0; s.Minimum == nil || *s.Minimum < 0 {
			s.Minimum = &zero
		}
	case "int32":
		s.Format = "int32"
	case "int64":
		s.Format = "int64"
	}
}

// constrainLength reads a length from strings.MaxRunes(n) or
// strings.MinRunes(n).
func constrainLength(s *apiextensionsv1.JSONSchemaProps, x *ast.CallExpr) {
	sel, ok := x.Fun.(*ast.SelectorExpr)
	if !ok || len(x.Args) != 1 {
		return
	}
	pkg, ok := sel.X.(*ast.Ident)
	if !ok {
		return
	}
	lit, ok := x.Args[0].(*ast.BasicLit)
	if !ok {
		return
	}
	n, err := strconv.ParseInt(lit.Value, 10, 64)
	if err != nil {
		return
	}
	switch pkg.Name + "." + fmt.Sprint(sel.Sel) {
	case "strings.MaxRunes":
		s.MaxLength = &n
	case "strings.MinRunes":
		s.MinLength = &n
	}
}

func disjuncts(e ast.Expr, out []ast.Expr) []ast.Expr {
	if p, ok := e.(*ast.ParenExpr); ok {
		e = p.X
	}
	if b, ok := e.(*ast.BinaryExpr); ok && b.Op == token.OR {
		return disjuncts(b.Y, disjuncts(b.X, out))
	}
	return append(out, e)
}

func literalJSON(l *ast.BasicLit) ([]byte, bool) {
	switch l.Kind {
	case token.STRING:
		str, err := strconv.Unquote(l.Value)
		if err != nil {
			return nil, false
		}
		b, _ := json.Marshal(str)
		return b, true
	case token.INT, token.FLOAT, token.TRUE, token.FALSE:
		return []byte(l.Value), true
	}
	return nil, false
}

func number(l *ast.BasicLit) (float64, bool) {
	f, err := strconv.ParseFloat(l.Value, 64)
	return f, err == nil
}

// numberFormat turns the ranges CUE gives int32 and int64 into formats, as
// Kubebuilder writes them, and drops the then-implied bounds.
func numberFormat(s *apiextensionsv1.JSONSchemaProps) {
	if s.Type != "integer" || s.Maximum == nil || s.ExclusiveMaximum {
		return
	}
	switch *s.Maximum {
	case math.MaxInt32:
		s.Format = "int32"
		s.Maximum = nil
		if s.Minimum != nil && *s.Minimum == math.MinInt32 {
			s.Minimum = nil
		}
	case math.MaxInt64:
		s.Format = "int64"
		s.Maximum = nil
		if s.Minimum != nil && *s.Minimum == math.MinInt64 {
			s.Minimum = nil
		}
	}
}

// docOf returns the field's doc comment, used as the schema's description.
func docOf(v cue.Value) string {
	var out string
	for _, cg := range v.Doc() {
		if t := cg.Text(); t != "" {
			if out != "" {
				out += "\n"
			}
			out += t
		}
	}
	if len(out) > 0 && out[len(out)-1] == '\n' {
		out = out[:len(out)-1]
	}
	return out
}

func ptr[T any](x T) *T { return &x }

// HasRequired reports whether the struct v has a required field, below it
// too: a parent must then give it (the CRD requires spec).
func HasRequired(v cue.Value) bool {
	if !v.Exists() || v.IncompleteKind() != cue.StructKind {
		return false
	}
	it, err := v.Fields(cue.Optional(true))
	if err != nil {
		return false
	}
	for it.Next() {
		if isRequired(it, it.Value()) {
			return true
		}
	}
	return false
}
