package openapi

import (
	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/cuengine/engine/contract"
)

// StatusShape is what the syntax of the template's `status` says one of
// its structs can hold, whatever the template's inputs: the fields set
// under an `if`, in a comprehension or by an optional field, which the
// compiled value (evaluated without a parent) does not show.
type StatusShape struct {
	fields map[string]*StatusShape
	// exprs are the values given to the field other than struct literals,
	// each with the names its comprehensions and lets bind around it.
	exprs []boundExpr
	// open: the struct may hold fields the syntax cannot name (a label
	// computed from data, an embedding of a reference).
	open bool
}

type boundExpr struct {
	expr  ast.Expr
	bound map[string]bool
}

func newStatusShape() *StatusShape { return &StatusShape{fields: map[string]*StatusShape{}} }

// StatusShapeOf reads the shape of the template's top-level `status` from
// its files. A file that does not parse leaves the status open: compile
// reports the error.
func StatusShapeOf(files []string) *StatusShape {
	sh := newStatusShape()
	for _, f := range files {
		af, err := parser.ParseFile(f, nil)
		if err != nil {
			sh.open = true
			continue
		}
		sh.topLevel(af.Decls, nil)
	}
	return sh
}

// topLevel finds the status fields among a file's (or a top-level
// comprehension's) declarations. A top-level field the syntax cannot name
// may be status itself.
func (sh *StatusShape) topLevel(decls []ast.Decl, bound map[string]bool) {
	for _, d := range decls {
		switch x := d.(type) {
		case *ast.Field:
			name, _, err := ast.LabelName(x.Label)
			switch {
			case err != nil:
				sh.open = true
			case name == "status":
				sh.value(x.Value, bound)
			}
		case *ast.Comprehension:
			inner := bindClauses(x.Clauses, bound)
			if body, ok := x.Value.(*ast.StructLit); ok {
				sh.topLevel(body.Elts, inner)
			} else {
				sh.open = true
			}
		case *ast.EmbedDecl:
			sh.open = true
		}
	}
}

// value adds what one value given to this struct contributes.
func (sh *StatusShape) value(e ast.Expr, bound map[string]bool) {
	switch x := e.(type) {
	case *ast.StructLit:
		sh.decls(x.Elts, bound)
	case *ast.ParenExpr:
		sh.value(x.X, bound)
	case *ast.BinaryExpr:
		if x.Op == token.AND {
			sh.value(x.X, bound)
			sh.value(x.Y, bound)
			return
		}
		sh.exprs = append(sh.exprs, boundExpr{x, bound})
	default:
		sh.exprs = append(sh.exprs, boundExpr{x, bound})
	}
}

func (sh *StatusShape) decls(decls []ast.Decl, bound map[string]bool) {
	for _, d := range decls {
		switch x := d.(type) {
		case *ast.Field:
			name, _, err := ast.LabelName(x.Label)
			if err != nil {
				sh.open = true // `(k): v`, `"\(k)": v`
				continue
			}
			f := sh.fields[name]
			if f == nil {
				f = newStatusShape()
				sh.fields[name] = f
			}
			f.value(x.Value, bound)
		case *ast.Comprehension:
			inner := bindClauses(x.Clauses, bound)
			if body, ok := x.Value.(*ast.StructLit); ok {
				sh.decls(body.Elts, inner)
			} else {
				sh.open = true
			}
		case *ast.LetClause:
			bound = with(bound, x.Ident.Name)
		case *ast.EmbedDecl:
			sh.value(x.Expr, bound)
		case *ast.Ellipsis:
			sh.open = true
		}
	}
}

// bindClauses returns bound with the names a comprehension's clauses bind.
func bindClauses(clauses []ast.Clause, bound map[string]bool) map[string]bool {
	for _, c := range clauses {
		switch x := c.(type) {
		case *ast.ForClause:
			if x.Key != nil {
				bound = with(bound, x.Key.Name)
			}
			if x.Value != nil {
				bound = with(bound, x.Value.Name)
			}
		case *ast.LetClause:
			bound = with(bound, x.Ident.Name)
		}
	}
	return bound
}

func with(bound map[string]bool, name string) map[string]bool {
	out := make(map[string]bool, len(bound)+1)
	for k := range bound {
		out[k] = true
	}
	out[name] = true
	return out
}

// uses reports whether e refers to any of the names.
func uses(e ast.Expr, names map[string]bool) bool {
	if len(names) == 0 {
		return false
	}
	found := false
	ast.Walk(e, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && names[id.Name] {
			found = true
		}
		return !found
	}, nil)
	return found
}

// complete adds to s, the schema of a status struct as the compiled value
// shows it, every field sh says the struct can hold. A field the value
// does not show is typed from its expression, evaluated in the template's
// scope, when that expression stands alone (it uses no name a
// comprehension binds); otherwise it keeps whatever it holds.
func complete(s apiextensionsv1.JSONSchemaProps, sh *StatusShape, scope statusScope) apiextensionsv1.JSONSchemaProps {
	if s.Type == "" && !s.XIntOrString && len(s.Properties) == 0 {
		s = shapeSchema(sh, scope)
	}
	if s.Type == "object" && len(sh.fields) > 0 {
		if s.Properties == nil {
			s.Properties = map[string]apiextensionsv1.JSONSchemaProps{}
		}
		for name, f := range sh.fields {
			s.Properties[name] = complete(s.Properties[name], f, scope)
		}
	}
	if s.Type == "object" && (sh.open || opaqueStruct(sh, scope)) {
		keepOpen(&s)
	}
	return s
}

// shapeSchema types a field the compiled value does not show from the
// expressions it is given.
func shapeSchema(sh *StatusShape, scope statusScope) apiextensionsv1.JSONSchemaProps {
	keep := apiextensionsv1.JSONSchemaProps{XPreserveUnknownFields: ptr(true)}
	if len(sh.exprs) == 0 {
		if len(sh.fields) > 0 || sh.open {
			return apiextensionsv1.JSONSchemaProps{Type: "object"}
		}
		return keep
	}
	var out *apiextensionsv1.JSONSchemaProps
	for _, be := range sh.exprs {
		v, ok := evalAlone(be, scope)
		if !ok {
			return keep
		}
		s := SchemaOf(v)
		if s.Type == "object" {
			keepOpen(&s)
		}
		switch {
		case out == nil:
			out = &s
		case out.Type != s.Type || s.Type == "":
			return keep
		}
	}
	if len(sh.fields) > 0 && out.Type != "object" {
		return keep
	}
	return *out
}

// opaqueStruct reports whether the struct is given a value the syntax
// cannot look into (a reference, a call) that may add fields.
func opaqueStruct(sh *StatusShape, scope statusScope) bool {
	for _, be := range sh.exprs {
		v, ok := evalAlone(be, scope)
		if !ok || v.IncompleteKind()&cue.StructKind != 0 {
			return true
		}
	}
	return false
}

// statusScope is where an expression of the template's status is
// evaluated on its own: the template's top level, in the compiler's
// context.
type statusScope struct {
	ctx *cue.Context
	top cue.Value
}

// evalAlone evaluates an expression of the template's status in the scope
// of the template's top level, unless it uses a name bound around it.
func evalAlone(be boundExpr, scope statusScope) (v cue.Value, ok bool) {
	if uses(be.expr, be.bound) {
		return cue.Value{}, false
	}
	defer func() {
		if recover() != nil { // no input may crash the process: keep the field
			v, ok = cue.Value{}, false
		}
	}()
	v = scope.ctx.BuildExpr(be.expr, cue.Scope(scope.top), cue.InferBuiltins(true))
	if v.Err() != nil && v.IncompleteKind() == cue.BottomKind {
		return cue.Value{}, false
	}
	return v, true
}

// keepOpen marks every object of s to keep the fields it does not declare:
// a value the syntax cannot look into may hold more than it shows.
func keepOpen(s *apiextensionsv1.JSONSchemaProps) {
	if s.Type == "object" {
		s.XPreserveUnknownFields = ptr(true)
	}
	for name, p := range s.Properties {
		keepOpen(&p)
		s.Properties[name] = p
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		keepOpen(s.AdditionalProperties.Schema)
	}
	if s.Items != nil && s.Items.Schema != nil {
		keepOpen(s.Items.Schema)
	}
}

// Paths of the template contract the status schema reads.
var (
	pathStatus    = cue.ParsePath("parent.status")
	pathOutStatus = cue.ParsePath("status")
)

// StatusSchema is the schema of a template's parent.status: it merges the declared parent.status, every field the
// template's status can produce (shape: those under an `if`, in a
// comprehension or optional, which the compiled value does not show) and
// the engine-owned fields. Nothing in status is required: the engine writes
// it bit by bit.
func StatusSchema(ctx *cue.Context, top cue.Value, shape *StatusShape) apiextensionsv1.JSONSchemaProps {
	s := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{}}
	if v := top.LookupPath(pathStatus); v.Exists() {
		declared := SchemaOf(v)
		for name, prop := range declared.Properties {
			s.Properties[name] = prop
		}
		if declared.XPreserveUnknownFields != nil && len(declared.Properties) == 0 {
			s.XPreserveUnknownFields = ptr(true)
		}
	}
	scope := statusScope{ctx: ctx, top: top}
	out := complete(SchemaOf(top.LookupPath(pathOutStatus)), shape, scope)
	for name, prop := range out.Properties {
		if _, declared := s.Properties[name]; !declared {
			s.Properties[name] = prop
		}
	}
	if out.XPreserveUnknownFields != nil && (len(out.Properties) == 0 || shape.open || opaqueStruct(shape, scope)) {
		s.XPreserveUnknownFields = ptr(true)
	}
	for name, prop := range engineStatusSchema() {
		s.Properties[name] = prop
	}
	s.Default = &apiextensionsv1.JSON{Raw: []byte(unhandledStatus)}
	return s
}

// unhandledStatus is the status of a parent the engine has not written
// one for yet, the apiserver's default (applied on every read of an object
// stored without a status): generation 0 observed. Tools that read status
// the way kstatus does (sigs.k8s.io/cli-utils, Flux's health checks,
// `kubectl wait`-style waiting) take an object with no status and no
// conditions for Current, ready; with this one they see an observed
// generation behind metadata.generation, InProgress, until the engine's
// first status.
const unhandledStatus = `{"observedGeneration":0}`

func engineStatusSchema() map[string]apiextensionsv1.JSONSchemaProps {
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	return map[string]apiextensionsv1.JSONSchemaProps{
		contract.StatusObservedGeneration: {Type: "integer", Format: "int64", Description: "The parent generation the engine last reconciled."},
		contract.StatusConditions: {
			Type:         "array",
			Description:  "Ready, Synced, Stalled, Reconciling and Paused, set by the engine.",
			XListType:    ptr("map"),
			XListMapKeys: []string{"type"},
			Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
				Type:     "object",
				Required: []string{"type", "status"},
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"type":               str,
					"status":             {Type: "string", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"True"`)}, {Raw: []byte(`"False"`)}, {Raw: []byte(`"Unknown"`)}}},
					"reason":             str,
					"message":            str,
					"lastTransitionTime": {Type: "string", Format: "date-time"},
					"observedGeneration": {Type: "integer", Format: "int64"},
				},
			}},
		},
		contract.StatusLastHandledReconcileAt: {Type: "string", Description: "The last engine.cuengine.dev/reconcile-requested-at value the engine reconciled the object for."},
		contract.StatusTemplateRevision: {
			Type:        "object",
			Description: "The template revision the engine last reconciled the object with (engine rollout history lists them).",
			Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"number": {Type: "integer", Format: "int64"},
				"hash":   str,
			},
		},
		contract.StatusResources: {
			Type:        "object",
			Description: "External resources by local name: external name and provider state.",
			AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &apiextensionsv1.JSONSchemaProps{
				Type: "object", XPreserveUnknownFields: ptr(true),
			}},
		},
	}
}
