package reads

import (
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/parser"
)

// Set records which parts of a value the engine fills in (parent,
// observed) a template reads, found in its source:
// `observed.deployment.status.readyReplicas` reads one field of one child,
// `parent.metadata.name` one field of the parent's metadata. Evaluation
// passes only those parts to CUE: every field handed to CUE is a node it
// converts and unifies on each evaluation (a live Deployment is hundreds of
// fields), and fields nobody reads would also make every evaluation look
// new to the template's memory. It is conservative by construction: a
// selector chain from the root keeps everything below the field it ends
// at, whatever its value then flows into (a definition, a comprehension,
// a function, an interpolation, a let, an embedding), so the scan never
// has to follow a value to prove a field below it unread. Any use the scan
// cannot follow (an alias, a bare `observed`, an index) makes it pass
// everything. templates/trim_test.go checks that trimming changes no result.
type Set struct {
	// All: everything is read, or a use the scan cannot follow.
	All bool
	// Paths are the paths read below each first field; an empty path
	// reads the whole field.
	Paths map[string][][]string
}

// Of scans the template's files for what they read of parent and of
// observed. A part of the parent the template declares (such as
// `parent: spec: {...}`) counts as read whole: its constraints apply to all
// of it.
func Of(files []string) (parent, observed Set) {
	parent.Paths = map[string][][]string{}
	observed.Paths = map[string][][]string{}
	for _, f := range files {
		af, err := parser.ParseFile(f, nil)
		if err != nil {
			parent.All, observed.All = true, true // compile reports it; be safe meanwhile
			continue
		}
		if !topLevel(af.Decls, func(name string, fd *ast.Field) {
			if name == "parent" {
				parent.declare(fd.Value)
			}
		}) {
			parent.All = true // a field the syntax cannot name may be the parent
		}
		parent.scan(af, "parent")
		observed.scan(af, "observed")
	}
	return parent, observed
}

// topLevel calls field for each top-level field among decls: those of a
// file and, recursively, of its top-level comprehensions' bodies. It
// reports false when the syntax cannot tell every top-level field: an
// embedding, or a label that is not a plain name, may stand for any.
func topLevel(decls []ast.Decl, field func(name string, f *ast.Field)) bool {
	known := true
	for _, d := range decls {
		switch x := d.(type) {
		case *ast.Field:
			if name, _, err := ast.LabelName(x.Label); err == nil {
				field(name, x)
			} else {
				known = false
			}
		case *ast.Comprehension:
			body, ok := x.Value.(*ast.StructLit)
			known = ok && topLevel(body.Elts, field) && known
		case *ast.EmbedDecl:
			known = false
		}
	}
	return known
}

// TopLevel returns the names of the top-level fields the template's files
// declare, or nil when the syntax cannot tell them all.
func TopLevel(files []string) map[string]bool {
	names := map[string]bool{}
	for _, f := range files {
		af, err := parser.ParseFile(f, nil)
		if err != nil || !topLevel(af.Decls, func(name string, _ *ast.Field) { names[name] = true }) {
			return nil
		}
	}
	return names
}

// declare records the parts of the parent one `parent:` field constrains;
// anything but a struct of plain fields counts as all of it.
func (r *Set) declare(v ast.Expr) {
	s, ok := v.(*ast.StructLit)
	if !ok {
		r.All = true
		return
	}
	for _, e := range s.Elts {
		switch x := e.(type) {
		case *ast.Field:
			name, _, err := ast.LabelName(x.Label)
			if err != nil {
				r.All = true
				continue
			}
			r.add([]string{name})
		case *ast.Ellipsis, *ast.CommentGroup, *ast.Attribute:
		default:
			r.All = true
		}
	}
}

// Scan returns what nodes read of the top-level field root (the
// compile-only blocks' check, templates/compileonly.go).
func Scan(root string, nodes ...ast.Node) Set {
	r := Set{Paths: map[string][][]string{}}
	for _, n := range nodes {
		r.scan(n, root)
	}
	return r
}

// scan records the references to the top-level field root in n.
func (r *Set) scan(n ast.Node, root string) {
	ast.Walk(n, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.Field:
			if aliasOf(x.Label, root) {
				r.All = true // X=parent: ... reads it under another name
			}
			// A plain label is not a reference; an interpolated or
			// parenthesised one is an expression.
			if _, _, err := ast.LabelName(x.Label); err != nil {
				r.scan(x.Label, root)
			}
			if x.Value != nil {
				r.scan(x.Value, root)
			}
			return false
		case *ast.SelectorExpr:
			if path, ok := SelectorPath(x); ok && path[0] == root {
				r.add(path[1:])
				return false
			}
			return true
		case *ast.Ident:
			if x.Name == root {
				r.All = true
			}
		}
		return true
	}, nil)
}

// aliasOf reports whether a label is an alias of the field name
// (`X=parent: ...`).
func aliasOf(l ast.Label, name string) bool {
	a, ok := l.(*ast.Alias)
	if !ok {
		return false
	}
	id, ok := a.Expr.(*ast.Ident)
	return ok && id.Name == name
}

func (r *Set) add(path []string) {
	if len(path) == 0 {
		r.All = true
		return
	}
	r.Paths[path[0]] = append(r.Paths[path[0]], path[1:])
}

// SelectorPath turns a.b.c into [a b c] when its root is a plain identifier.
func SelectorPath(e ast.Expr) ([]string, bool) {
	switch x := e.(type) {
	case *ast.Ident:
		return []string{x.Name}, true
	case *ast.SelectorExpr:
		head, ok := SelectorPath(x.X)
		if !ok {
			return nil, false
		}
		name, _, err := ast.LabelName(x.Sel)
		if err != nil {
			return nil, false
		}
		return append(head, name), true
	}
	return nil, false
}

// Filter returns the observed state reduced to what the template reads,
// and the same without the parts where none of the template's paths leads
// to anything, for the template's memory. The template cannot tell those
// two apart, nor the second from the observed state without such a part:
// each read through it is incomplete either way. So a child that appears
// without the fields the template reads (a new Deployment has no status
// yet) is, to the memory, the same input as no child. Only an error's
// message would differ (the field it names as undefined), and errors are
// not remembered: they come from evaluating the first.
func (r *Set) Filter(observed map[string]any) (in, key map[string]any) {
	switch {
	case r.All:
		return observed, observed
	case len(observed) == 0:
		return observed, nil
	}
	in = make(map[string]any, len(observed))
	key = make(map[string]any, len(observed))
	for name, v := range observed {
		paths, used := r.Paths[name]
		if !used {
			continue
		}
		var found bool
		if in[name], key[name], found = pick(v, paths); !found {
			delete(key, name)
		}
	}
	if len(key) == 0 {
		key = nil // as no observed state at all
	}
	return in, key
}

// pick copies the given paths of v (an empty path keeps v whole), and
// returns it also without the parts where no path leads to anything, and
// whether anything is left in that.
func pick(v any, paths [][]string) (picked, found any, ok bool) {
	m, isMap := v.(map[string]any)
	if !isMap {
		return v, v, true
	}
	in, key := map[string]any{}, map[string]any{}
	for _, p := range paths {
		if len(p) == 0 {
			return v, v, true
		}
		child, present := m[p[0]]
		if !present {
			continue
		}
		var found bool
		if in[p[0]], key[p[0]], found = pick(child, below(paths, p[0])); !found {
			delete(key, p[0])
		}
	}
	return in, key, len(key) > 0
}

// Parent returns the parent's content reduced to what the template reads
// or declares of its metadata and status; the rest (apiVersion, kind, and
// spec, which the schema checks as a whole) is kept.
func (r *Set) Parent(content map[string]any) map[string]any {
	if r.All {
		return content
	}
	out := make(map[string]any, len(content))
	for k, v := range content {
		switch k {
		case "metadata", "status":
			if paths, read := r.Paths[k]; read {
				out[k], _, _ = pick(v, paths)
			}
		default:
			out[k] = v
		}
	}
	return out
}

// below returns the paths that start with field, without it.
func below(paths [][]string, field string) [][]string {
	var rest [][]string
	for _, q := range paths {
		if len(q) > 0 && q[0] == field {
			rest = append(rest, q[1:])
		}
	}
	return rest
}
