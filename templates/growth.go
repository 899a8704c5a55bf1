package templates

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/parser"

	"github.com/cuengine/engine/templates/reads"
)

// GrowthWarnings lists, as file:line:col: messages, each list.Range (or
// strings.Repeat) whose
// arguments read a parent field (parent.spec...) that the schema does not
// bound from above: a comprehension over it grows with what a parent
// gives, and one parent can make its evaluation as large as it likes. CUE
// cannot interrupt an evaluation, so one past --evaluation-timeout holds
// its memory to its end (render.Budget caps how many). It warns only on
// what the syntax shows: a field read through a let or another field is
// not followed, and a bound is any < or <= on the field (with or without
// a default), a concrete value, or a type such as uint8.
func (t *Template) GrowthWarnings() (out []string) {
	defer recoveredWarning(t.Path, "looking for growth", &out)
	seen := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(t.files)) {
		if filepath.Ext(name) != ".cue" || strings.HasPrefix(name, "cue.mod/") {
			continue
		}
		f, err := parser.ParseFile(filepath.Join(t.root, name), t.files[name])
		if err != nil {
			continue // compile reported it
		}
		ast.Walk(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			fn := growthCall(call.Fun)
			if fn == "" {
				return true
			}
			for _, arg := range call.Args {
				for _, path := range parentPaths(arg) {
					field := t.value.LookupPath(cue.ParsePath(path))
					if !field.Exists() || field.IncompleteKind()&cue.NumberKind == 0 || upperBounded(field) {
						continue
					}
					w := fmt.Sprintf("%s: %s over %s, which the schema does not bound: a parent can make this evaluation as large as it likes, so the engine evaluates this template in its evaluator processes, where one past --evaluation-timeout or --evaluator-memory is stopped, at a cost to every evaluation; bound the field, as in %s: *0 | int & >=0 & <=1000",
						position(t.root, call.Pos()), fn, path, path[strings.LastIndex(path, ".")+1:])
					if !seen[w] {
						seen[w] = true
						out = append(out, w)
					}
				}
			}
			return true
		}, nil)
	}
	return out
}

// growthCall names fun when it is a call whose result grows with a number
// argument: list.Range, or strings.Repeat, as their imports name them;
// "" otherwise.
func growthCall(fun ast.Expr) string {
	sel, ok := fun.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	x, ok := sel.X.(*ast.Ident)
	name, _, err := ast.LabelName(sel.Sel)
	if !ok || err != nil {
		return ""
	}
	if call := x.Name + "." + name; call == "list.Range" || call == "strings.Repeat" {
		return call
	}
	return ""
}

// MayRunAway reports whether a parent can make the template's evaluation
// as large as it likes (GrowthWarnings has something to say): the engine
// evaluates such a template where a runaway can be stopped (package
// evaluator), not in its own process.
func (t *Template) MayRunAway() bool { return t.mayRunAway }

// parentPaths returns the paths under parent.spec that expr reads by
// selectors, such as parent.spec.quad.
func parentPaths(expr ast.Expr) []string {
	var out []string
	ast.Walk(expr, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if path, ok := reads.SelectorPath(sel); ok && len(path) > 2 && path[0] == "parent" && path[1] == "spec" {
			out = append(out, strings.Join(path, "."))
			return false // the longest path only
		}
		return true
	}, nil)
	return out
}

// upperBounded reports whether the schema keeps a number field under a
// bound: a < or <= among its conjuncts, in every alternative, past its
// default (which a parent may replace), or a concrete value.
func upperBounded(v cue.Value) bool {
	op, args := v.Expr()
	switch op {
	case cue.LessThanOp, cue.LessThanEqualOp:
		return true
	case cue.AndOp:
		return slices.ContainsFunc(args, upperBounded)
	case cue.OrOp:
		return !slices.ContainsFunc(args, func(a cue.Value) bool { return !upperBounded(a) })
	case cue.NoOp:
		if _, ok := v.Default(); ok && len(args) == 1 {
			return upperBounded(args[0]) // the value without its default
		}
	}
	return v.IsConcrete()
}
