package reconciler

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cuengine/engine/contract"
)

// TestUnconvertibleParentStallsAlone: a parent the cache holds as stored,
// marked as not converting to the hub, is Stalled with ConversionFailed and
// the conversion's message; it is not evaluated, and nothing but its
// status is written. The same kind's other parent is served.
func TestUnconvertibleParentStallsAlone(t *testing.T) {
	bad := unitParent(unitGreedy, "bad", map[string]any{"count": int64(1)})
	MarkUnconvertible(bad, "converting v1 to v2: app.cue:18:30: spec.count: invalid value 20 (out of bound <=10)")
	good := unitParent(unitGreedy, "good", map[string]any{"count": int64(1)})
	e := newUnitEnv(t, unitGreedy, bad, good)

	evaluated := e.evaluations()
	_, err := e.reconcile(bad)
	require.True(t, isTerminal(err), "%v", err)
	assert.Equal(t, evaluated, e.evaluations(), "not evaluated")
	assert.Equal(t, map[string]int{"status Greedy": 1}, e.takeWrites(), "only its status written")
	for _, typ := range []string{contract.ConditionStalled, contract.ConditionSynced} {
		c := e.condition(bad, typ)
		require.NotNil(t, c, typ)
		assert.Equal(t, contract.ReasonConversionFailed, c.Reason, typ)
		assert.Contains(t, c.Message, "does not convert to unit.cuengine.dev/v1")
		assert.Contains(t, c.Message, "app.cue:18:30: spec.count: invalid value 20 (out of bound <=10)")
	}
	assert.Nil(t, e.get(configMapGVK, unitNamespace, "bad-0"), "no child")

	e.reconcileClean(good)
	assert.NotNil(t, e.get(configMapGVK, unitNamespace, "good-0"), "the other parent served")
}
