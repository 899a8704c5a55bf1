package templates

import (
	"slices"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/build"

	"github.com/cuengine/engine/templates/reads"
)

// compileOnly names the top-level blocks the engine reads once, when it
// compiles a template (crd.go, compile.go; templates/policy), and never in an
// evaluation; and versions, read by conversions (versions.go, convert.go)
// from the whole template.
var compileOnly = []string{"crd", "policy", "rollout", "versions"}

// withoutCompileOnly builds the template again without its compile-only
// blocks, for evaluations: unifying a parent with the template evaluates
// every field of the template again, and these never change a result. It
// returns v when the template has none of them or when anything else refers
// to one. The syntax is the same (the files' declarations are left out for
// the build and put back), so positions in errors stay the same.
func (c *compiler) withoutCompileOnly(inst *build.Instance, v cue.Value) (cue.Value, error) {
	all := make([][]ast.Decl, len(inst.Files))
	kept := make([][]ast.Decl, len(inst.Files))
	dropped := false
	for i, f := range inst.Files {
		all[i] = f.Decls
		for _, d := range f.Decls {
			if isCompileOnly(d) {
				dropped = true
				continue
			}
			kept[i] = append(kept[i], d)
		}
	}
	if !dropped || refersToCompileOnly(kept) {
		return v, nil
	}
	// The compiler knows references by the files that declare them, so the
	// same files are built, as another instance (a built instance is
	// remembered by its address).
	for i, f := range inst.Files {
		f.Decls = kept[i]
	}
	defer func() {
		for i, f := range inst.Files {
			f.Decls = all[i]
		}
	}()
	slim := *inst
	return c.buildInstance(&slim)
}

// isCompileOnly reports whether a top-level declaration is a field of a
// compile-only block.
func isCompileOnly(d ast.Decl) bool {
	f, ok := d.(*ast.Field)
	if !ok {
		return false
	}
	name, _, err := ast.LabelName(f.Label)
	return err == nil && slices.Contains(compileOnly, name)
}

// refersToCompileOnly reports whether any of the declarations may refer to
// a compile-only block.
func refersToCompileOnly(decls [][]ast.Decl) bool {
	for _, b := range compileOnly {
		var nodes []ast.Node
		for _, file := range decls {
			for _, d := range file {
				nodes = append(nodes, d)
			}
		}
		if r := reads.Scan(b, nodes...); r.All || len(r.Paths) > 0 {
			return true
		}
	}
	return false
}
