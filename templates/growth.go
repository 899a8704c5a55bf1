package templates

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/format"
	"cuelang.org/go/cue/parser"

	"github.com/cuengine/engine/templates/reads"
)

// GrowthWarnings lists, as file:line:col: messages, each iteration nested
// over two lists of the parent (nestedGrowth), and each list.Range (or
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
		t.nestedGrowth(f, seen, &out)
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

// nestedGrowth warns, at the inner one, of for clauses nested over lists
// of the parent (`for a in parent.spec.x for b in parent.spec.y`, or a
// comprehension inside another's body): the evaluation grows with the
// product of their lengths, which a parent decides up to the size of an
// object, so that a 3 MiB spec can make it run for hours. A list the
// schema bounds (list.MaxItems, or a concrete list) does not count; one
// over a part of an element (`for p in a.ports`) grows with the input, not
// its square, and does not either.
func (t *Template) nestedGrowth(f *ast.File, seen map[string]bool, out *[]string) {
	var outer []string // the parent lists the enclosing for clauses range over
	var depth []int    // how many each enclosing comprehension added
	ast.Walk(f, func(n ast.Node) bool {
		c, ok := n.(*ast.Comprehension)
		if !ok {
			return true
		}
		added := 0
		for _, cl := range c.Clauses {
			fc, ok := cl.(*ast.ForClause)
			if !ok {
				continue
			}
			for _, path := range parentPaths(fc.Source) {
				if !t.unboundedList(path) {
					continue
				}
				if len(outer) > 0 {
					w := fmt.Sprintf("%s: iteration over %s nested in one over %s, which the schema does not bound: the evaluation grows with the product of their lengths, so a parent can make it as large as it likes, and the engine evaluates this template in its evaluator processes, where one past --evaluation-timeout or --evaluator-memory is stopped, at a cost to every evaluation; bound the lists, as in %s: [...] & list.MaxItems(100)",
						position(t.root, fc.Pos()), path, outer[len(outer)-1], path[strings.LastIndex(path, ".")+1:])
					if !seen[w] {
						seen[w] = true
						*out = append(*out, w)
					}
				}
				outer = append(outer, path)
				added++
			}
		}
		depth = append(depth, added)
		return true
	}, func(n ast.Node) {
		if _, ok := n.(*ast.Comprehension); ok {
			outer = outer[:len(outer)-depth[len(depth)-1]]
			depth = depth[:len(depth)-1]
		}
	})
}

// unboundedList reports whether the parent field at path is a list the
// schema does not bound in length: neither concrete nor under a
// list.MaxItems. Unsure is unbounded.
func (t *Template) unboundedList(path string) bool {
	v := t.value.LookupPath(cue.ParsePath(path))
	if !v.Exists() || v.IncompleteKind()&cue.ListKind == 0 {
		return false
	}
	if _, err := v.Len().Int64(); err == nil {
		return false // a closed list: its length is fixed
	}
	b, err := format.Node(v.Syntax(cue.Raw()))
	return err != nil || !strings.Contains(string(b), "MaxItems(")
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
