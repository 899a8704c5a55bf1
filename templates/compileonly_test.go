package templates

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEvaluatedLeavesOutCompileOnlyBlocks: evaluations unify the template
// without crd, policy and rollout, unless something else refers to them;
// the compiled template keeps them all.
func TestEvaluatedLeavesOutCompileOnlyBlocks(t *testing.T) {
	mk := loadOne(t, examples, "mykind")
	assert.True(t, mk.value.LookupPath(pathCRD).Exists())
	assert.False(t, mk.evaluated.LookupPath(pathCRD).Exists())
	assert.True(t, mk.evaluated.LookupPath(pathChildren).Exists())

	dir := t.TempDir()
	writeTemplate(t, dir, "t.cue", `
parent: {apiVersion: "example.com/v1", kind: "Shop"}
policy: clusterScoped: true
crd: shortNames: ["sh"]
children: ns: {apiVersion: "v1", kind: "Namespace", metadata: name: "shop", metadata: labels: cluster: "\(policy.clusterScoped)"}
`)
	tm := loadOne(t, dir)
	assert.True(t, tm.evaluated.LookupPath(pathPolicy).Exists(), "children read policy: the template is evaluated whole")
	res, err := tm.Evaluate(Input{Parent: shop()})
	require.NoError(t, err)
	require.Len(t, res.Children, 1)
	assert.Equal(t, map[string]string{"cluster": "true"}, res.Children[0].Object.GetLabels())
}
