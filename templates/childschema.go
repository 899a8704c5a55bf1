package templates

import (
	"errors"
	"fmt"
	"sort"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/parser"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates/openapi"
)

// LoadOptions are where Load finds the schemas of child kinds besides the
// built-in kinds and the kinds of the directory's own templates.
type LoadOptions struct {
	// CRDs are CustomResourceDefinitions children may be instances of
	// (engine vet --crds DIR).
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// Cluster, when set, is asked for kinds nobody else knows (engine run
	// and diff: the cluster's OpenAPI v3 discovery).
	Cluster SchemaSource
}

// SchemaSource serves OpenAPI v3 documents, one per group version, as the
// apiserver does at /openapi/v3/apis/<group>/<version>.
type SchemaSource = openapi.SchemaSource

// Unchecked is a child kind that has no schema, so its children were not
// checked: a warning, never an error.
type Unchecked struct {
	// Template is the template's path, relative to the templates directory.
	Template string
	// Child is the child's local name, the first one of that kind.
	Child string
	Kind  schema.GroupVersionKind
	// Err is why the cluster's schema could not be read, if it was asked.
	Err error
}

func (u Unchecked) String() string {
	if u.Err != nil {
		return fmt.Sprintf("%s: children.%s: kind %s is not checked: %v", u.Template, u.Child, contract.KindString(u.Kind), u.Err)
	}
	return fmt.Sprintf("%s: children.%s: kind %s has no schema; its children are not checked (engine vet --crds DIR adds CRDs)",
		u.Template, u.Child, contract.KindString(u.Kind))
}

// childSchemas finds and builds the CUE definition of each child kind, once
// per Load: the built-in kinds, then the set's own kinds (their generated
// CRDs), the CRDs of the options, then the cluster (openapi.Kinds).
type childSchemas struct {
	c     *compiler
	kinds *openapi.Kinds
	built map[*openapi.KindSchema]cue.Value
}

func newChildSchemas(c *compiler, set *Set, opts LoadOptions) (*childSchemas, error) {
	kinds, err := openapi.NewKinds(opts.Cluster)
	if err != nil {
		return nil, err
	}
	for _, crd := range opts.CRDs {
		if err := kinds.AddCRD(crd, "CRD "+crd.Name); err != nil {
			return nil, err
		}
	}
	for _, t := range set.templates {
		if err := kinds.AddCRD(t.crd, "template "+t.Path); err != nil {
			return nil, err
		}
	}
	return &childSchemas{c: c, kinds: kinds, built: map[*openapi.KindSchema]cue.Value{}}, nil
}

// definition returns the kind's CUE definition in the compiler's context.
func (cs *childSchemas) definition(ks *openapi.KindSchema) (cue.Value, error) {
	if v, ok := cs.built[ks]; ok {
		return v, nil
	}
	// BuildExpr, not CompileString: the context keeps every instance it
	// compiles for as long as it lives, and it lives as long as the
	// templates do; an expression it builds is garbage once unused.
	expr, err := parser.ParseExpr("", "{\n"+ks.CUE()+"}") // no file: errors point into the template
	if err != nil {
		return cue.Value{}, fmt.Errorf("schema from %s does not parse: %w", ks.Origin(), err)
	}
	v := cs.c.ctx.BuildExpr(expr).LookupPath(cue.MakePath(cue.Def("#kind")))
	if err := v.Err(); err != nil {
		return cue.Value{}, fmt.Errorf("schema from %s does not compile: %w", ks.Origin(), err)
	}
	cs.built[ks] = v
	return v, nil
}

// checkChildren unifies each child the template declares with its kind's
// schema, twice: as the template stands before anything exists, and with
// every observed name it reads present but unknown ({...}), so a child
// behind `if observed.bucket != _|_` is checked too. A child whose
// apiVersion or kind is not known before a parent exists is not checked;
// one whose kind has no schema is returned as unchecked.
func (cs *childSchemas) checkChildren(t *Template) ([]Unchecked, error) {
	out := &Error{Template: t.Path}
	c := &childCheck{seen: map[schema.GroupVersionKind]bool{}, problems: map[string]bool{}, out: out}
	if err := cs.checkValue(t, t.evaluated, c); err != nil {
		return nil, err
	}
	if names := t.observedReads.Paths; len(names) > 0 && !t.observedReads.All {
		v, open := t.evaluated, cs.c.ctx.BuildExpr(ast.NewStruct(&ast.Ellipsis{}))
		for name := range names {
			v = v.FillPath(cue.MakePath(cue.Str("observed"), cue.Str(name)), open)
		}
		if err := cs.checkValue(t, v, c); err != nil {
			return nil, err
		}
	}
	if len(out.Problems) > 0 {
		sort.SliceStable(out.Problems, func(i, j int) bool { return out.Problems[i].Pos < out.Problems[j].Pos })
		return c.unchecked, out
	}
	return c.unchecked, nil
}

// childCheck collects what the checks of one template find.
type childCheck struct {
	unchecked []Unchecked
	seen      map[schema.GroupVersionKind]bool
	problems  map[string]bool
	out       *Error
}

func (cs *childSchemas) checkValue(t *Template, v cue.Value, c *childCheck) error {
	children := v.LookupPath(pathChildren)
	if !children.Exists() {
		return nil
	}
	it, err := children.Fields()
	if err != nil {
		return nil // not known before a parent exists: evaluation reports it
	}
	for it.Next() {
		name, child := it.Selector().Unquoted(), it.Value()
		apiVersion, err1 := child.LookupPath(cue.ParsePath("apiVersion")).String()
		kind, err2 := child.LookupPath(cue.ParsePath("kind")).String()
		if err1 != nil || err2 != nil {
			continue
		}
		gv, err := schema.ParseGroupVersion(apiVersion)
		if err != nil {
			continue // evaluation reports it, with the parent
		}
		gvk := gv.WithKind(kind)
		ks, err := cs.kinds.Lookup(gvk)
		if ks == nil {
			if !c.seen[gvk] {
				c.seen[gvk] = true
				c.unchecked = append(c.unchecked, Unchecked{Template: t.Path, Child: name, Kind: gvk, Err: err})
			}
			continue
		}
		def, err := cs.definition(ks)
		if err != nil {
			return err
		}
		var problems []Problem
		if err := def.Unify(child).Validate(); err != nil {
			problems = childProblems(cs.c.root, name, ks.CRD(), def, child, err)
		}
		problems = append(problems, checkOwnershipSchema(cs.c.root, name, def, child)...) // leftfields.go
		for _, p := range problems {
			if !c.problems[p.String()] {
				c.problems[p.String()] = true
				c.out.Problems = append(c.out.Problems, p)
			}
		}
	}
	return nil
}

// checkSchemas checks the children of every template of the set against
// their kinds' schemas, adding a template's conflicts to failed and the
// kinds without a schema to the set's warnings. A template that fails
// leaves the set.
func (c *compiler) checkSchemas(set *Set, opts LoadOptions, failed *LoadError) error {
	cs, err := newChildSchemas(c, set, opts)
	if err != nil {
		return err
	}
	passed := set.templates[:0:0]
	for _, t := range set.templates {
		unchecked, err := cs.checkChildren(t)
		set.unchecked = append(set.unchecked, unchecked...)
		if err == nil {
			if pe := cs.checkClusterPolicy(t); pe != nil { // policy.go
				err = pe
			}
			if pe := t.checkClusterTargets(); pe != nil && err == nil { // clusters.go
				err = pe
			}
		}
		if err != nil {
			var te *Error
			if !errors.As(err, &te) {
				return err
			}
			failed.Errors = append(failed.Errors, te)
			delete(set.byGVK, t.GVK)
			continue
		}
		passed = append(passed, t)
	}
	set.templates = passed
	return nil
}
