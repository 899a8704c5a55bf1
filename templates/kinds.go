package templates

import (
	"sort"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/parser"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cuengine/engine/templates/graph"
)

// ChildKinds returns the kinds of children the template can produce, as far
// as its source shows: every struct with a literal apiVersion and kind,
// including children inside comprehensions that only appear for some
// parents. The engine watches these kinds from the start (and RBAC
// generation grants them); a kind computed at run time is picked up when
// first produced.
func (t *Template) ChildKinds() []schema.GroupVersionKind {
	return append([]schema.GroupVersionKind(nil), t.childKinds...)
}

// secretGVK is the kind of a resource's connection Secret.
var secretGVK = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}

// childKindsOf scans the source files for literal apiVersion/kind pairs,
// and for connectionSecret fields, whose Secrets the engine writes.
func childKindsOf(files []string, parent schema.GroupVersionKind) []schema.GroupVersionKind {
	seen := map[schema.GroupVersionKind]bool{}
	for _, f := range files {
		af, err := parser.ParseFile(f, nil)
		if err != nil {
			continue // compile already reported it
		}
		ast.Walk(af, func(n ast.Node) bool {
			if f, ok := n.(*ast.Field); ok {
				switch label, _, err := ast.LabelName(f.Label); {
				case err != nil:
				case label == fieldConnectionSecret:
					// A resource's connection Secret is a child too.
					seen[secretGVK] = true
				case label == "references":
					// A referenced object is read, never written: not a child.
					return false
				}
				return true
			}
			s, ok := n.(*ast.StructLit)
			if !ok {
				return true
			}
			apiVersion, kind := graph.LiteralField(s, "apiVersion"), graph.LiteralField(s, "kind")
			if apiVersion == "" || kind == "" {
				return true
			}
			gv, err := schema.ParseGroupVersion(apiVersion)
			if err != nil {
				return true
			}
			if gvk := gv.WithKind(kind); gvk != parent {
				seen[gvk] = true
			}
			return true
		}, nil)
	}
	out := make([]schema.GroupVersionKind, 0, len(seen))
	for gvk := range seen {
		out = append(out, gvk)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// ChildKind returns the kind of the child name when the template states it
// without a parent: its apiVersion and kind are constants of the template.
func (t *Template) ChildKind(name string) (schema.GroupVersionKind, bool) {
	child := t.evaluated.LookupPath(cue.MakePath(cue.Str("children"), cue.Str(name)))
	apiVersion, err1 := child.LookupPath(cue.ParsePath("apiVersion")).String()
	kind, err2 := child.LookupPath(cue.ParsePath("kind")).String()
	if err1 != nil || err2 != nil {
		return schema.GroupVersionKind{}, false
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return schema.GroupVersionKind{}, false
	}
	return gv.WithKind(kind), true
}
