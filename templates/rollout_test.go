package templates

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRolloutPolicy: the rollout block's defaults, and each bad value as an
// error at its field.
func TestRolloutPolicy(t *testing.T) {
	const head = `parent: {apiVersion: "example.com/v1", kind: "P"}` + "\n"
	progressive := Rollout{Strategy: RolloutProgressive, Waves: []Wave{{Count: 1}, {Percent: 25}, {Percent: 100}}, ProgressDeadline: 2 * time.Minute, MaxFailures: 1, Pins: DefaultPins}
	immediate := func(f func(*Rollout)) Rollout {
		r := DefaultRollout
		f(&r)
		return r
	}
	for _, tt := range []struct {
		name, rollout string
		want          Rollout
		err           string
	}{
		{"none", ``, DefaultRollout, ""},
		{"progressive defaults", `rollout: strategy: "Progressive"`, Rollout{Strategy: RolloutProgressive, Waves: defaultWaves, ProgressDeadline: 5 * time.Minute, Pins: DefaultPins}, ""},
		{"progressive", `rollout: {strategy: "Progressive", waves: [1, "25%", "100%"], progressDeadline: "2m", maxFailures: 1}`, progressive, ""},
		{"allow deletions", `rollout: allowDeletions: true`, Rollout{Strategy: RolloutImmediate, Waves: DefaultRollout.Waves, ProgressDeadline: 5 * time.Minute, AllowDeletions: true, Pins: DefaultPins}, ""},
		{"max failures share", `rollout: maxFailures: "10%"`, immediate(func(r *Rollout) { r.MaxFailuresPercent = 10 }), ""},
		{"canary namespaces", `rollout: canary: namespaces: ["canary", "staging"]`, immediate(func(r *Rollout) { r.Canary.Namespaces = []string{"canary", "staging"} }), ""},
		{"canary object label", `rollout: canary: {objectLabel: true}`, immediate(func(r *Rollout) { r.Canary.ObjectLabel = true }), ""},
		{"pins allowed", `rollout: pins: "Allow"`, DefaultRollout, ""},
		{"pins forbidden", `rollout: pins: "Forbid"`, immediate(func(r *Rollout) { r.Pins = Pins{Forbid: true} }), ""},
		{"pins to the newest", `rollout: pins: newest: 3`, immediate(func(r *Rollout) { r.Pins = Pins{Newest: 3} }), ""},
		{"bad strategy", `rollout: strategy: "Canary"`, Rollout{}, `t.cue:2:10: rollout.strategy: must be "Immediate" or "Progressive", not "Canary"`},
		{"shrinking waves", `rollout: waves: ["50%", "10%", "100%"]`, Rollout{}, `t.cue:2:10: rollout.waves: waves are cumulative and must grow: 10% after 50%`},
		{"not ending at 100%", `rollout: waves: [1, "50%"]`, Rollout{}, `t.cue:2:10: rollout.waves: the last wave must be "100%" (every parent), not 50%`},
		{"bad share", `rollout: waves: ["150%"]`, Rollout{}, `t.cue:2:10: rollout.waves: a share of parents is written "1%" to "100%", not "150%"`},
		{"bad count", `rollout: waves: [0, "100%"]`, Rollout{}, `t.cue:2:10: rollout.waves: a count of parents must be a whole number of 1 or more, not 0`},
		{"bad deadline", `rollout: progressDeadline: "soon"`, Rollout{}, `t.cue:2:10: rollout.progressDeadline: must be a positive duration such as "2m", not "soon"`},
		{"negative failures", `rollout: maxFailures: -1`, Rollout{}, `t.cue:2:10: rollout.maxFailures: must be a count of 0 or more, or a share such as "10%", not -1`},
		{"bad failures share", `rollout: maxFailures: "120%"`, Rollout{}, `t.cue:2:10: rollout.maxFailures: a share of the objects is written "0%" to "100%", not "120%"`},
		{"failures not a share", `rollout: maxFailures: "ten"`, Rollout{}, `t.cue:2:10: rollout.maxFailures: a share of the objects is written "0%" to "100%", not "ten"`},
		{"canary not a struct", `rollout: canary: true`, Rollout{}, `t.cue:2:10: rollout.canary: must be a struct such as {namespaces: ["canary"]}, not true`},
		{"canary bad namespace", `rollout: canary: namespaces: ["Not_A_Namespace"]`, Rollout{}, `t.cue:2:10: rollout.canary: namespaces: "Not_A_Namespace" is not a namespace name`},
		{"canary namespaces not a list", `rollout: canary: namespaces: "canary"`, Rollout{}, `t.cue:2:10: rollout.canary: namespaces must be a list of namespace names, not canary`},
		{"canary object label not a bool", `rollout: canary: objectLabel: "yes"`, Rollout{}, `t.cue:2:10: rollout.canary: objectLabel must be true or false, not yes`},
		{"canary unknown field", `rollout: canary: labels: {tier: "canary"}`, Rollout{}, `t.cue:2:10: rollout.canary: unknown field "labels" (namespaces, objectLabel)`},
		{"bad pins", `rollout: pins: "Sometimes"`, Rollout{}, `t.cue:2:10: rollout.pins: must be "Allow", "Forbid" or {newest: N}, not "Sometimes"`},
		{"pins newest zero", `rollout: pins: newest: 0`, Rollout{}, `t.cue:2:10: rollout.pins: newest must be a whole number from 1 to 100, not 0`},
		{"pins newest too many", `rollout: pins: newest: 1000`, Rollout{}, `t.cue:2:10: rollout.pins: newest must be a whole number from 1 to 100, not 1000`},
		{"pins unknown field", `rollout: pins: minRevision: 3`, Rollout{}, `t.cue:2:10: rollout.pins: unknown field "minRevision" (newest)`},
		{"unknown field", `rollout: {strategy: "Progressive", soakTime: "30s"}`, Rollout{}, `t.cue:2:36: rollout.soakTime: unknown field (the rollout block has: strategy, waves, progressDeadline, maxFailures, allowDeletions, canary, pins, soak, analysis, freeze)`},
		{"misspelt field", `rollout: maxFailure: 3`, Rollout{}, `t.cue:2:10: rollout.maxFailure: unknown field (the rollout block has: strategy, waves, progressDeadline, maxFailures, allowDeletions, canary, pins, soak, analysis, freeze)`},
		{"pins not a policy", `rollout: pins: true`, Rollout{}, `t.cue:2:10: rollout.pins: must be "Allow", "Forbid" or {newest: N}, not true`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "t.cue"), []byte(head+tt.rollout+"\n"), 0o644))
			set, err := Load(dir)
			if tt.err != "" {
				require.Error(t, err)
				assert.Equal(t, tt.err, err.Error())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, set.Templates()[0].Rollout)
		})
	}
}

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

// TestPolicyWithin: an older revision's rights, bounded by the newest
// template's policy.
func TestPolicyWithin(t *testing.T) {
	all := Namespaces{All: true}
	shared := Namespaces{Names: []string{"shared"}}
	for _, tt := range []struct {
		name     string
		p, bound Policy
		want     Policy
	}{
		{"narrowed to a list", Policy{CrossNamespace: all, ClusterScoped: true}, Policy{CrossNamespace: shared}, Policy{CrossNamespace: shared}},
		{"narrowed to none", Policy{CrossNamespace: all}, Policy{}, Policy{}},
		{"not widened", Policy{}, Policy{CrossNamespace: all, ClusterScoped: true}, Policy{}},
		{"lists intersect", Policy{CrossNamespace: Namespaces{Names: []string{"a", "shared"}}}, Policy{CrossNamespace: Namespaces{Names: []string{"shared", "b"}}}, Policy{CrossNamespace: shared}},
		{"same", Policy{CrossNamespace: shared, ClusterScoped: true}, Policy{CrossNamespace: shared, ClusterScoped: true}, Policy{CrossNamespace: shared, ClusterScoped: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.p.Within(tt.bound))
		})
	}
}
