package templates

import (
	"fmt"

	"cuelang.org/go/cue"

	"github.com/cuengine/engine/contract"
)

// engineLabels are the labels the engine sets on every child, replacing
// whatever the template gives them (render.Desired), with why.
var engineLabels = []struct{ key, why string }{
	{contract.LabelManagedBy, `to "` + contract.ManagedByValue + `": the engine's caches select its children by it`},
	{contract.LabelParentUID, "to the parent's UID, the proof a child is the parent's"},
	{contract.LabelChild, "to the child's local name"},
	{contract.LabelShard, "to the parent's shard, under sharding"},
}

// EngineLabelWarnings returns, at its line, each label a child of the
// template sets that the engine sets itself on every child, and so
// replaces: a template written for another tool (Timoni's #Metadata sets
// app.kubernetes.io/managed-by: "timoni") would otherwise lose its value
// without a word. Children the template makes only from a parent (under
// an if, in a comprehension over the spec) are not known here; render
// replaces the value there all the same. A warning of engine vet.
func (t *Template) EngineLabelWarnings() (out []string) {
	defer recoveredWarning(t.Path, "reading the children's labels", &out)
	it, err := t.evaluated.LookupPath(pathChildren).Fields()
	if err != nil {
		return nil
	}
	for it.Next() {
		labels := it.Value().LookupPath(cue.ParsePath("metadata.labels"))
		if !labels.Exists() {
			continue
		}
		for _, l := range engineLabels {
			v := labels.LookupPath(cue.MakePath(cue.Str(l.key)))
			if !v.Exists() {
				continue
			}
			given := "a value"
			if s, err := v.String(); err == nil {
				given = fmt.Sprintf("%q", s)
			}
			if given == fmt.Sprintf("%q", contract.ManagedByValue) && l.key == contract.LabelManagedBy {
				continue // the engine's own value: nothing replaced
			}
			out = append(out, fmt.Sprintf("%s: children.%s.metadata.labels[%q]: the template gives it %s, which the engine replaces on the child: it sets this label on every child %s",
				userPos(t.root, v), it.Selector().String(), l.key, given, l.why))
		}
	}
	return out
}
