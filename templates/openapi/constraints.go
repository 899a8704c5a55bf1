package openapi

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/format"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"
)

// Constraint is a constraint of the parent's spec that the CRD's OpenAPI
// schema (SchemaOf) does not carry, because schema.go drops or loosens it: a
// bound read from another field, a second pattern, `!=`, a validator from a
// package, a disjunction of shapes, a check in a hidden field. The
// apiserver accepts an object that breaks it; the engine's validating
// webhook refuses it at admission (templates.Template.NeedsAdmission).
type Constraint struct {
	// Pos is "file:line:col" of the constraint, relative to the templates
	// directory.
	Pos string
	// Path is the field's path from the parent, such as "spec.replicas";
	// "[]" stands for any item of a list, "*" for any value of a map.
	Path string
	// What is the constraint's source.
	What string
}

func (c Constraint) String() string { return c.Pos + ": " + c.Path + ": " + c.What }

// Constraints walks the value of parent.spec as SchemaOf does and returns,
// in the order of its fields, what it does not translate. files are the
// template's source files: the compiled value shows what an `if` in the
// spec adds only when it holds, the source shows the `if` itself. pos
// formats a position in the user's files ("file:line:col" relative to the
// templates directory), "" for one that is not the user's.
func Constraints(spec cue.Value, files []string, pos func(token.Pos) string) []Constraint {
	if !spec.Exists() {
		return nil
	}
	w := &constraintWalk{pos: pos}
	w.value(spec, "spec")
	for _, f := range files {
		af, err := parser.ParseFile(f, nil)
		if err != nil {
			continue // it compiled: the compiler read it
		}
		w.comprehensions(af.Decls, nil)
	}
	return w.out
}

// comprehensions reports each `if` or `for` inside parent.spec in the
// source (and spec fields a top-level one adds).
func (w *constraintWalk) comprehensions(decls []ast.Decl, path []string) {
	for _, d := range decls {
		switch x := d.(type) {
		case *ast.Field:
			name, _, err := ast.LabelName(x.Label)
			if err != nil {
				continue
			}
			w.comprehensionsIn(x.Value, append(slices.Clip(path), name))
		case *ast.EmbedDecl:
			w.comprehensionsIn(x.Expr, path)
		case *ast.Comprehension:
			if inSpec(path) {
				w.out = append(w.out, Constraint{Pos: w.pos(x.Pos()), Path: strings.Join(path[1:], "."), What: declLine(x)})
				continue
			}
			w.comprehensionsIn(x.Value, path)
		}
	}
}

func (w *constraintWalk) comprehensionsIn(e ast.Node, path []string) {
	if len(path) > 0 && path[0] != "parent" || len(path) > 1 && path[1] != "spec" {
		return
	}
	switch x := e.(type) {
	case *ast.StructLit:
		w.comprehensions(x.Elts, path)
	case *ast.BinaryExpr:
		w.comprehensionsIn(x.X, path)
		w.comprehensionsIn(x.Y, path)
	case *ast.ParenExpr:
		w.comprehensionsIn(x.X, path)
	}
}

func inSpec(path []string) bool { return len(path) >= 2 && path[0] == "parent" && path[1] == "spec" }

type constraintWalk struct {
	pos func(token.Pos) string
	out []Constraint
}

func (w *constraintWalk) add(v cue.Value, n ast.Node, path string) {
	pos := ""
	if n != nil {
		pos = w.pos(n.Pos())
	}
	if pos == "" {
		pos = valuePos(w.pos, v)
	}
	w.out = append(w.out, Constraint{Pos: pos, Path: path, What: oneLine(n, v)})
}

func (w *constraintWalk) value(v cue.Value, path string) {
	kind := v.IncompleteKind() &^ cue.BottomKind
	def, hasDef := v.Default()
	if (kind == cue.TopKind || kind == 0) && hasDef && def.IsConcrete() {
		kind = def.IncompleteKind()
	}
	kind &^= cue.NullKind
	if kind == 0 && undecidedStruct(v) {
		kind = cue.StructKind // its `if` is reported from the source
	}
	switch kind {
	case cue.StructKind, cue.ListKind:
		if w.shapes(v, def, hasDef, path) {
			return
		}
		if alt, ok := besidesDefault(v, def, hasDef); ok {
			// `*{app: "x"} | {[string]: string}`: the CRD's schema is the
			// alternative's, the default its default (withDefault).
			w.value(alt, path)
			return
		}
		if kind == cue.StructKind {
			w.fields(v, path)
		} else if elem := v.LookupPath(cue.MakePath(cue.AnyIndex)); elem.Exists() {
			w.value(elem, path+"[]")
		}
	default:
		// A scalar, or a value whose kind CUE cannot tell without the
		// parent (`int & >=port` in a list item): the CRD keeps whatever
		// it holds, and the syntax says what is lost.
		w.scalar(v, path)
	}
}

// shapes reports a disjunction of structs or lists with more than one
// alternative besides the default: the CRD gets the union of their
// fields, none required (unionSchema). It returns true when it did.
func (w *constraintWalk) shapes(v, def cue.Value, hasDef bool, path string) bool {
	op, alts := v.Expr()
	if op != cue.OrOp {
		return false
	}
	n := 0
	for _, a := range alts {
		if !hasDef || !a.Equals(def) {
			n++
		}
	}
	if n < 2 {
		return false
	}
	w.add(v, nil, path)
	return true
}

// besidesDefault is the one alternative of a struct or list disjunction
// with a default that is not the default.
func besidesDefault(v, def cue.Value, hasDef bool) (cue.Value, bool) {
	if !hasDef {
		return cue.Value{}, false
	}
	op, alts := v.Expr()
	if op == cue.NoOp && len(alts) == 1 && !hasDefault(alts[0]) {
		// `*close({app: "x"}) | {[string]: string}` reads so (CUE v0.17.1).
		return alts[0], true
	}
	if op != cue.OrOp {
		return cue.Value{}, false
	}
	var others []cue.Value
	for _, a := range alts {
		if !a.Equals(def) {
			others = append(others, a)
		}
	}
	if len(others) != 1 {
		return cue.Value{}, false
	}
	return others[0], true
}

func (w *constraintWalk) fields(v cue.Value, path string) {
	it, err := v.Fields(cue.Optional(true), cue.Hidden(true))
	if err != nil {
		return
	}
	for it.Next() {
		sel := it.Selector()
		switch {
		case sel.IsDefinition():
		case sel.PkgPath() != "":
			// A hidden field is no field of the object: whatever it
			// constrains, the CRD does not see it.
			w.add(it.Value(), nil, path+"."+sel.String())
		default:
			w.value(it.Value(), path+"."+sel.Unquoted())
		}
	}
	if elem := v.LookupPath(cue.MakePath(cue.AnyString)); elem.Exists() {
		w.value(elem, path+".*")
	}
}

// scalar reads a scalar's syntax the way constrain does and reports every
// part constrain does not turn into OpenAPI.
func (w *constraintWalk) scalar(v cue.Value, path string) {
	s := &scalarScan{}
	s.scan(scalarSyntax(v))
	if len(s.patterns) > 1 {
		// constrain keeps the last pattern: the others are dropped.
		s.loose = append(s.loose, s.patterns[:len(s.patterns)-1]...)
	}
	for _, n := range s.loose {
		w.add(v, n, path)
	}
}

type scalarScan struct {
	patterns []ast.Node
	loose    []ast.Node
}

// scan mirrors constrain: what it reads is fine, the rest is loose.
func (s *scalarScan) scan(n ast.Node) {
	switch x := n.(type) {
	case *ast.File:
		for _, d := range x.Decls {
			switch d.(type) {
			case *ast.ImportDecl, *ast.Package:
			default:
				s.scan(d)
			}
		}
	case *ast.EmbedDecl:
		s.scan(x.Expr)
	case *ast.StructLit:
		for _, d := range x.Elts {
			if e, ok := d.(*ast.EmbedDecl); ok {
				s.scan(e)
			}
		}
	case *ast.ParenExpr:
		s.scan(x.X)
	case *ast.BinaryExpr:
		switch x.Op {
		case token.AND:
			s.scan(x.X)
			s.scan(x.Y)
		case token.OR:
			s.disjunction(x)
		default:
			s.loose = append(s.loose, x)
		}
	case *ast.UnaryExpr:
		s.unary(x)
	case *ast.Ident:
		if !translatedType[x.Name] {
			s.loose = append(s.loose, x) // a reference to another field
		}
	case *ast.CallExpr:
		if !isLength(x) {
			s.loose = append(s.loose, x)
		}
	case *ast.BasicLit:
		s.loose = append(s.loose, x) // a fixed value: the CRD has its type only
	default:
		s.loose = append(s.loose, n)
	}
}

// disjunction: literals make an enum; one other alternative beside
// literals (the default) is read; more are loose.
func (s *scalarScan) disjunction(x *ast.BinaryExpr) {
	var others []ast.Expr
	for _, a := range disjuncts(x, nil) {
		if u, ok := a.(*ast.UnaryExpr); ok && u.Op == token.MUL {
			a = u.X
		}
		if _, ok := a.(*ast.BasicLit); !ok {
			others = append(others, a)
		}
	}
	switch len(others) {
	case 0:
	case 1:
		s.scan(others[0])
	default:
		s.loose = append(s.loose, x)
	}
}

func (s *scalarScan) unary(x *ast.UnaryExpr) {
	lit, isLit := x.X.(*ast.BasicLit)
	switch x.Op {
	case token.GEQ, token.GTR, token.LEQ, token.LSS:
		if isLit {
			if _, ok := number(lit); ok {
				return
			}
		}
	case token.MAT:
		if isLit {
			if _, err := strconv.Unquote(lit.Value); err == nil {
				s.patterns = append(s.patterns, x)
				return
			}
		}
	}
	s.loose = append(s.loose, x)
}

// translatedType are the type names constrain reads fully: those whose
// range the CRD carries (a format, uint's minimum) or that have none. The
// smaller integer types (int8, uint16, ...) have a range it drops.
var translatedType = map[string]bool{
	"string": true, "bytes": true, "bool": true, "null": true, "_": true,
	"int": true, "int32": true, "int64": true, "uint": true,
	"float": true, "number": true, "float64": true,
}

func isLength(x *ast.CallExpr) bool {
	sel, ok := x.Fun.(*ast.SelectorExpr)
	if !ok || len(x.Args) != 1 {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	if !ok || pkg.Name != "strings" {
		return false
	}
	lit, ok := x.Args[0].(*ast.BasicLit)
	if !ok || lit.Kind != token.INT {
		return false
	}
	switch fmt.Sprint(sel.Sel) {
	case "MaxRunes", "MinRunes":
		return true
	}
	return false
}

// declLine is a declaration's source on one line.
func declLine(d ast.Decl) string {
	out := oneLine(&ast.StructLit{Elts: []ast.Decl{d}}, cue.Value{})
	return strings.TrimSuffix(strings.TrimPrefix(out, "{"), "}")
}

// oneLine is n's CUE source on one line, or v's when n is nil.
func oneLine(n ast.Node, v cue.Value) string {
	if n == nil {
		n = v.Syntax(cue.Raw())
	}
	switch d := n.(type) {
	case *ast.Comprehension, *ast.Field, *ast.EmbedDecl, *ast.LetClause:
		// A declaration: cue/format (v0.17.1) formats it only inside a
		// struct, and panics on a bare comprehension.
		return declLine(d.(ast.Decl))
	}
	b, err := format.Node(n)
	if err != nil {
		return ""
	}
	out := strings.Join(strings.Fields(string(b)), " ")
	return strings.NewReplacer("{ ", "{", " }", "}").Replace(out)
}

// valuePos is where v is in the user's files: its own position, or that of
// its first field when v itself starts in the engine's contract.
func valuePos(pos func(token.Pos) string, v cue.Value) string {
	if p := pos(v.Pos()); p != "" {
		return p
	}
	if it, err := v.Fields(cue.Optional(true)); err == nil {
		for it.Next() {
			if p := pos(it.Value().Pos()); p != "" {
				return p
			}
		}
	}
	return ""
}
