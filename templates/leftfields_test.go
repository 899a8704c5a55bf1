package templates

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOwnershipEvaluated: a child's ownership is the engine's: not
// applied, carried in Child.Ownership, and kept by the template's memory.
func TestOwnershipEvaluated(t *testing.T) {
	dir := t.TempDir()
	writeTemplate(t, dir, "t.cue", readyHead+`
children: deployment: {
	apiVersion: "apps/v1"
	kind:       "Deployment"
	metadata: name: "web"
	spec: replicas: parent.spec.replicas
	ownership: {"spec.replicas": "CreateOnly", "metadata.annotations": "Shared"}
}
`)
	tm := loadOne(t, dir)
	want := map[string]string{"spec.replicas": "CreateOnly", "metadata.annotations": "Shared"}
	res, err := tm.Evaluate(Input{Parent: readyParent()})
	require.NoError(t, err)
	require.Len(t, res.Children, 1)
	assert.Equal(t, want, res.Children[0].Ownership)
	assert.NotContains(t, res.Children[0].Object.Object, "ownership", "the engine's, not applied")
	again, err := tm.Evaluate(Input{Parent: readyParent()})
	require.NoError(t, err)
	assert.True(t, again.Remembered)
	assert.Equal(t, want, again.Children[0].Ownership, "the memory keeps it")
}

// TestOwnershipRefusedAtEvaluation: a child of a kind without a schema is
// not checked by vet; evaluation refuses what it can tell without one.
func TestOwnershipRefusedAtEvaluation(t *testing.T) {
	for _, tc := range []struct{ ownership, want string }{
		{`{"spec.size": parent.spec.mode}`, `t/t.cue:13:14: children.gadget.ownership."spec.size": must be "CreateOnly" or "Shared", not "Mine"`},
		{`{"spec.items[0]": "CreateOnly"}`, `t/t.cue:13:14: children.gadget.ownership."spec.items[0]": names a list item: a path goes through fields only (a list is left to others whole, or not at all)`},
		{`{"spec": "CreateOnly", "spec.size": "CreateOnly"}`, `t/t.cue:13:36: children.gadget.ownership."spec.size": is inside "spec", which is listed too: list one of them`},
		{`{"status.phase": "CreateOnly"}`, `t/t.cue:13:14: children.gadget.ownership."status.phase": is not a field the template may leave to others`},
		{`"CreateOnly"`, `t/t.cue:13:2: children.gadget.ownership: must be a map of field path to "CreateOnly" or "Shared", such as {"spec.replicas": "CreateOnly"}`},
	} {
		t.Run(tc.ownership, func(t *testing.T) {
			dir := t.TempDir()
			writeTemplate(t, dir, "t.cue", `package t

parent: {
	apiVersion: "example.com/v1"
	kind:       "Shop"
	spec: mode: *"Mine" | string
}
children: gadget: {
	apiVersion: "example.org/v1"
	kind:       "Gadget"
	metadata: name: "g"
	spec: size: 1
	ownership: `+tc.ownership+`
}
`)
			tm := loadOne(t, dir)
			p := readyParent()
			p.Object["spec"] = map[string]any{}
			_, err := tm.Evaluate(Input{Parent: p})
			require.Error(t, err)
			assert.Equal(t, tc.want, err.Error())
		})
	}
}
