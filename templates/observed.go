package templates

import (
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/parser"
)

// observedUse records which parts of observed a template reads, found in its
// source: `observed.deployment.status.readyReplicas` reads one field of one
// child. Evaluation passes only those parts to CUE, since converting a whole
// live object (a Deployment is hundreds of fields) costs more than the rest
// of an evaluation. Any use the scan cannot follow (an alias, an index, a
// bare `observed`) makes it pass everything.
type observedUse struct {
	all   bool
	paths map[string][][]string // local name -> paths below it; an empty path: the whole object
}

func observedUseOf(files []string) observedUse {
	use := observedUse{paths: map[string][][]string{}}
	for _, f := range files {
		af, err := parser.ParseFile(f, nil)
		if err != nil {
			use.all = true // compile reports it; be safe meanwhile
			continue
		}
		use.scan(af)
	}
	return use
}

func (u *observedUse) scan(n ast.Node) {
	ast.Walk(n, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.Field:
			// A label named observed is not a reference: look at the value.
			if x.Value != nil {
				u.scan(x.Value)
			}
			return false
		case *ast.SelectorExpr:
			if path, ok := selectorPath(x); ok {
				if path[0] == "observed" {
					u.add(path[1:])
					return false
				}
			}
			return true
		case *ast.Ident:
			if x.Name == "observed" {
				u.all = true
			}
		}
		return true
	}, nil)
}

func (u *observedUse) add(path []string) {
	if len(path) == 0 {
		u.all = true
		return
	}
	u.paths[path[0]] = append(u.paths[path[0]], path[1:])
}

// selectorPath turns a.b.c into [a b c] when its root is a plain identifier.
func selectorPath(e ast.Expr) ([]string, bool) {
	switch x := e.(type) {
	case *ast.Ident:
		return []string{x.Name}, true
	case *ast.SelectorExpr:
		head, ok := selectorPath(x.X)
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

// filter returns the observed state reduced to what the template reads.
func (u *observedUse) filter(observed map[string]any) map[string]any {
	if u.all || len(observed) == 0 {
		return observed
	}
	out := make(map[string]any, len(observed))
	for name, v := range observed {
		paths, used := u.paths[name]
		if !used {
			continue
		}
		out[name] = pick(v, paths)
	}
	return out
}

// pick copies the given paths of v; an empty path keeps v whole.
func pick(v any, paths [][]string) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := map[string]any{}
	for _, p := range paths {
		if len(p) == 0 {
			return v
		}
		child, ok := m[p[0]]
		if !ok {
			continue
		}
		var rest [][]string
		for _, q := range paths {
			if len(q) > 0 && q[0] == p[0] {
				rest = append(rest, q[1:])
			}
		}
		out[p[0]] = pick(child, rest)
	}
	return out
}
