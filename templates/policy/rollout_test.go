package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWaveOf: a wave covers at least one parent when there are any, and
// never more than there are.
func TestWaveOf(t *testing.T) {
	for _, tt := range []struct {
		wave         Wave
		total, count int
	}{
		{Wave{Count: 1}, 20, 1},
		{Wave{Count: 5}, 3, 3},
		{Wave{Percent: 25}, 20, 5},
		{Wave{Percent: 10}, 3, 1},
		{Wave{Percent: 100}, 20, 20},
		{Wave{Percent: 50}, 0, 0},
	} {
		assert.Equal(t, tt.count, tt.wave.Of(tt.total), "%s of %d", tt.wave, tt.total)
	}
}

// TestFailuresAllowed: a count is the count whatever the fleet; a share is
// rounded down.
func TestFailuresAllowed(t *testing.T) {
	for _, tt := range []struct {
		rollout      Rollout
		total, count int
		written      string
	}{
		{Rollout{MaxFailures: 2}, 100, 2, "2"},
		{Rollout{MaxFailures: 0}, 100, 0, "0"},
		{Rollout{MaxFailuresPercent: 10}, 100, 10, "10%"},
		{Rollout{MaxFailuresPercent: 10}, 19, 1, "10%"},
		{Rollout{MaxFailuresPercent: 10}, 9, 0, "10%"},
		{Rollout{MaxFailuresPercent: 100}, 7, 7, "100%"},
	} {
		assert.Equal(t, tt.count, tt.rollout.FailuresAllowed(tt.total), "%s of %d", tt.written, tt.total)
		assert.Equal(t, tt.written, tt.rollout.MaxFailuresString())
	}
}

// TestCanaryIncludes: the policy's namespaces are canaries; an object's own
// label only where the policy allows it.
func TestCanaryIncludes(t *testing.T) {
	labelled := map[string]string{"engine.cuengine.dev/canary": "true"}
	for _, tt := range []struct {
		name      string
		canary    Canary
		namespace string
		labels    map[string]string
		want      bool
	}{
		{"no policy, labelled", Canary{}, "default", labelled, false},
		{"label allowed", Canary{ObjectLabel: true}, "default", labelled, true},
		{"label allowed, not labelled", Canary{ObjectLabel: true}, "default", nil, false},
		{"canary namespace", Canary{Namespaces: []string{"canary"}}, "canary", nil, true},
		{"other namespace, labelled", Canary{Namespaces: []string{"canary"}}, "default", labelled, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.canary.Includes(tt.namespace, tt.labels))
		})
	}
}

// TestPinsAllows: pins reach the newest revisions only, and none when
// forbidden.
func TestPinsAllows(t *testing.T) {
	for _, tt := range []struct {
		pins           Pins
		number, newest int64
		want           bool
	}{
		{Pins{Newest: 3}, 5, 5, true},
		{Pins{Newest: 3}, 3, 5, true},
		{Pins{Newest: 3}, 2, 5, false},
		{Pins{Newest: 1}, 4, 5, false},
		{Pins{Forbid: true}, 5, 5, false},
		{DefaultPins, 1, 10, true},
		{DefaultPins, 1, 11, false},
		{Pins{}, 2, 11, true},
		{Pins{}, 1, 11, false},
	} {
		assert.Equal(t, tt.want, tt.pins.Allows(tt.number, tt.newest), "%s: %d of %d", tt.pins, tt.number, tt.newest)
	}
}

// TestConditionHolds: each operator, and NaN holding none.
func TestConditionHolds(t *testing.T) {
	for _, tt := range []struct {
		cond string
		v    float64
		want bool
	}{
		{"< 0.05", 0.01, true}, {"< 0.05", 0.05, false}, {"<= 0.05", 0.05, true},
		{"> 1", 2, true}, {">= 1", 1, true}, {"== 0", 0, true}, {"!= 0", 0, false},
	} {
		c, err := ParseCondition(tt.cond)
		require.NoError(t, err)
		assert.Equal(t, tt.want, c.Holds(tt.v), "%s %g", tt.cond, tt.v)
		assert.Equal(t, tt.cond, c.String())
	}
}
