package templates

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGrowthWarnings: a list.Range whose size a parent field decides is
// flagged at its position when the schema leaves the field unbounded
// above, through a default or not, alone or in an expression; a bound
// (<=, <, a type such as uint8, a definition's value) or a field not from
// the parent is not.
func TestGrowthWarnings(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "t.cue"), []byte(`import (
	"list"
	"strings"
)

#Max: 100
parent: {
	apiVersion: "x.dev/v1"
	kind:       "Gr"
	spec: {
		quad:    *0 | int & >=0
		count:   int & >=0
		nested: n: *1 | int
		small:   *1 | int & >=0 & <=#Max
		tiny:    uint8
		under:   *0 | int & <1000
		either:  *0 | int & <10 | int & <=20
		name:    *"x" | string
	}
}
children: {
	for i in list.Range(0, parent.spec.small*parent.spec.tiny+parent.spec.under, 1) {
		"c\(i)": {apiVersion: "v1", kind: "ConfigMap", metadata: name: "x\(i)"}
	}
}
status: {
	sum: list.Sum([for i in list.Range(0, parent.spec.quad, 1) for j in list.Range(0, parent.spec.quad, 1) {i + j}])
	n: len([for i in list.Range(0, parent.spec.count*2, 1) {i}])
	deep: len(list.Range(parent.spec.nested.n, 10, 1))
	either: len(list.Range(0, parent.spec.either, 1))
	fixed: len(list.Range(0, 10, 1))
	text: strings.Repeat("x", parent.spec.count)
	short: strings.Repeat("x", parent.spec.small)
}
`), 0o644))
	set, err := Load(dir)
	require.NoError(t, err)
	tpl := set.Templates()[0]
	const tail = ", which the schema does not bound: a parent can make this evaluation as large as it likes, so the engine evaluates this template in its evaluator processes, where one past --evaluation-timeout or --evaluator-memory is stopped, at a cost to every evaluation; bound the field, as in "
	assert.Equal(t, []string{
		"t.cue:27:26: list.Range over parent.spec.quad" + tail + "quad: *0 | int & >=0 & <=1000",
		"t.cue:27:70: list.Range over parent.spec.quad" + tail + "quad: *0 | int & >=0 & <=1000",
		"t.cue:28:19: list.Range over parent.spec.count" + tail + "count: *0 | int & >=0 & <=1000",
		"t.cue:29:12: list.Range over parent.spec.nested.n" + tail + "n: *0 | int & >=0 & <=1000",
		"t.cue:32:8: strings.Repeat over parent.spec.count" + tail + "count: *0 | int & >=0 & <=1000",
	}, tpl.GrowthWarnings())
	assert.True(t, tpl.MayRunAway(), "evaluated where a runaway can be stopped")

	bounded, err := Load("../examples/templates")
	require.NoError(t, err)
	for _, tmpl := range bounded.Templates() {
		assert.False(t, tmpl.MayRunAway(), "%s: evaluated in the engine's process", tmpl.Path)
	}
}

// TestNestedIterationWarnings: iteration nested over two lists of the
// parent, in one comprehension or one inside another's body, is flagged at
// the inner for; over an element's own list, over a list the schema bounds
// (list.MaxItems), or not nested, it is not.
func TestNestedIterationWarnings(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "t.cue"), []byte(`import "list"

parent: {
	apiVersion: "x.dev/v1"
	kind:       "Ne"
	spec: {
		hosts: [...string]
		paths: [...string]
		short: [...string] & list.MaxItems(10)
		apps: [...{name: string, ports: [...int]}]
	}
}
status: {
	pairs: len([for h in parent.spec.hosts for p in parent.spec.paths {h + p}])
	inner: [for h in parent.spec.hosts {[for p in parent.spec.paths {h + p}]}]
	bounded: len([for h in parent.spec.short for p in parent.spec.short {h + p}])
	ports: len([for a in parent.spec.apps for p in a.ports {p}])
	flat: len([for h in parent.spec.hosts {h}])
}
`), 0o644))
	set, err := Load(dir)
	require.NoError(t, err)
	tpl := set.Templates()[0]
	const tail = "which the schema does not bound: the evaluation grows with the product of their lengths, so a parent can make it as large as it likes, and the engine evaluates this template in its evaluator processes, where one past --evaluation-timeout or --evaluator-memory is stopped, at a cost to every evaluation; bound the lists, as in paths: [...] & list.MaxItems(100)"
	assert.Equal(t, []string{
		"t.cue:14:41: iteration over parent.spec.paths nested in one over parent.spec.hosts, " + tail,
		"t.cue:15:39: iteration over parent.spec.paths nested in one over parent.spec.hosts, " + tail,
	}, tpl.GrowthWarnings())
	assert.True(t, tpl.MayRunAway())
}
