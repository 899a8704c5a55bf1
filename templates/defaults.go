package templates

import (
	"fmt"

	"cuelang.org/go/cue"
)

// mergeProbe is a field name no schema declares: a struct that allows it is
// open.
var mergeProbe = cue.Str("__engine_merge_probe__")

// DefaultWarnings returns the fields of parent.spec whose default is an open
// struct beside an alternative that takes other keys, such as
// `labels: *{app: "x"} | {[string]: string}`. CUE unifies the value a user
// gives with such a default instead of replacing it, so the default's keys
// stay beside the user's (`{team: "a"}` becomes `{app: "x", team: "a"}`),
// while the CRD's default, and every peer's, applies only when the field is
// absent. A warning of engine vet, never an error: merging may be meant.
func (t *Template) DefaultWarnings() (out []string) {
	defer recoveredWarning(t.Path, "reading the spec's defaults", &out)
	spec := t.value.LookupPath(cue.ParsePath("parent.spec"))
	if !spec.Exists() {
		return nil
	}
	t.defaultWarnings(spec, "parent.spec", &out)
	return out
}

func (t *Template) defaultWarnings(v cue.Value, path string, out *[]string) {
	if def, ok := v.Default(); ok && def.IncompleteKind() == cue.StructKind && def.Allows(mergeProbe) {
		if op, alts := v.Expr(); op == cue.OrOp && len(alts) > 1 {
			*out = append(*out, fmt.Sprintf("%s: %s: the default is an open struct, so CUE merges a value the user gives into it and the default's keys stay beside the user's; write *close({...}) | ... for a default the user's value replaces",
				position(t.root, def.Pos()), path))
			return
		}
	}
	if v.IncompleteKind() != cue.StructKind {
		return
	}
	it, err := v.Fields(cue.Optional(true))
	if err != nil {
		return
	}
	for it.Next() {
		t.defaultWarnings(it.Value(), path+"."+it.Selector().String(), out)
	}
}
