package templates

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cuengine/engine/templates/policy"
)

// TestRolloutPolicy: the rollout block's defaults, and each bad value as an
// error at its field.
func TestRolloutPolicy(t *testing.T) {
	const head = `parent: {apiVersion: "example.com/v1", kind: "P"}` + "\n"
	progressive := policy.Rollout{Strategy: policy.RolloutProgressive, Waves: []policy.Wave{{Count: 1}, {Percent: 25}, {Percent: 100}}, ProgressDeadline: 2 * time.Minute, MaxFailures: 1, Pins: policy.DefaultPins}
	immediate := func(f func(*policy.Rollout)) policy.Rollout {
		r := policy.DefaultRollout
		f(&r)
		return r
	}
	for _, tt := range []struct {
		name, rollout string
		want          policy.Rollout
		err           string
	}{
		{"none", ``, policy.DefaultRollout, ""},
		{"progressive defaults", `rollout: strategy: "Progressive"`, policy.Rollout{Strategy: policy.RolloutProgressive, Waves: policy.DefaultWaves, ProgressDeadline: 5 * time.Minute, Pins: policy.DefaultPins}, ""},
		{"progressive", `rollout: {strategy: "Progressive", waves: [1, "25%", "100%"], progressDeadline: "2m", maxFailures: 1}`, progressive, ""},
		{"allow deletions", `rollout: allowDeletions: true`, policy.Rollout{Strategy: policy.RolloutImmediate, Waves: policy.DefaultRollout.Waves, ProgressDeadline: 5 * time.Minute, AllowDeletions: true, Pins: policy.DefaultPins}, ""},
		{"max failures share", `rollout: maxFailures: "10%"`, immediate(func(r *policy.Rollout) { r.MaxFailuresPercent = 10 }), ""},
		{"canary namespaces", `rollout: canary: namespaces: ["canary", "staging"]`, immediate(func(r *policy.Rollout) { r.Canary.Namespaces = []string{"canary", "staging"} }), ""},
		{"canary object label", `rollout: canary: {objectLabel: true}`, immediate(func(r *policy.Rollout) { r.Canary.ObjectLabel = true }), ""},
		{"pins allowed", `rollout: pins: "Allow"`, policy.DefaultRollout, ""},
		{"pins forbidden", `rollout: pins: "Forbid"`, immediate(func(r *policy.Rollout) { r.Pins = policy.Pins{Forbid: true} }), ""},
		{"pins to the newest", `rollout: pins: newest: 3`, immediate(func(r *policy.Rollout) { r.Pins = policy.Pins{Newest: 3} }), ""},
		{"bad strategy", `rollout: strategy: "Canary"`, policy.Rollout{}, `t.cue:2:10: rollout.strategy: must be "Immediate" or "Progressive", not "Canary"`},
		{"shrinking waves", `rollout: waves: ["50%", "10%", "100%"]`, policy.Rollout{}, `t.cue:2:10: rollout.waves: waves are cumulative and must grow: 10% after 50%`},
		{"not ending at 100%", `rollout: waves: [1, "50%"]`, policy.Rollout{}, `t.cue:2:10: rollout.waves: the last wave must be "100%" (every parent), not 50%`},
		{"bad share", `rollout: waves: ["150%"]`, policy.Rollout{}, `t.cue:2:10: rollout.waves: a share of parents is written "1%" to "100%", not "150%"`},
		{"bad count", `rollout: waves: [0, "100%"]`, policy.Rollout{}, `t.cue:2:10: rollout.waves: a count of parents must be a whole number of 1 or more, not 0`},
		{"bad deadline", `rollout: progressDeadline: "soon"`, policy.Rollout{}, `t.cue:2:10: rollout.progressDeadline: must be a positive duration such as "2m", not "soon"`},
		{"negative failures", `rollout: maxFailures: -1`, policy.Rollout{}, `t.cue:2:10: rollout.maxFailures: must be a count of 0 or more, or a share such as "10%", not -1`},
		{"bad failures share", `rollout: maxFailures: "120%"`, policy.Rollout{}, `t.cue:2:10: rollout.maxFailures: a share of the objects is written "0%" to "100%", not "120%"`},
		{"failures not a share", `rollout: maxFailures: "ten"`, policy.Rollout{}, `t.cue:2:10: rollout.maxFailures: a share of the objects is written "0%" to "100%", not "ten"`},
		{"canary not a struct", `rollout: canary: true`, policy.Rollout{}, `t.cue:2:10: rollout.canary: must be a struct such as {namespaces: ["canary"]}, not true`},
		{"canary bad namespace", `rollout: canary: namespaces: ["Not_A_Namespace"]`, policy.Rollout{}, `t.cue:2:10: rollout.canary: namespaces: "Not_A_Namespace" is not a namespace name`},
		{"canary namespaces not a list", `rollout: canary: namespaces: "canary"`, policy.Rollout{}, `t.cue:2:10: rollout.canary: namespaces must be a list of namespace names, not canary`},
		{"canary object label not a bool", `rollout: canary: objectLabel: "yes"`, policy.Rollout{}, `t.cue:2:10: rollout.canary: objectLabel must be true or false, not yes`},
		{"canary unknown field", `rollout: canary: labels: {tier: "canary"}`, policy.Rollout{}, `t.cue:2:10: rollout.canary: unknown field "labels" (namespaces, objectLabel)`},
		{"bad pins", `rollout: pins: "Sometimes"`, policy.Rollout{}, `t.cue:2:10: rollout.pins: must be "Allow", "Forbid" or {newest: N}, not "Sometimes"`},
		{"pins newest zero", `rollout: pins: newest: 0`, policy.Rollout{}, `t.cue:2:10: rollout.pins: newest must be a whole number from 1 to 100, not 0`},
		{"pins newest too many", `rollout: pins: newest: 1000`, policy.Rollout{}, `t.cue:2:10: rollout.pins: newest must be a whole number from 1 to 100, not 1000`},
		{"pins unknown field", `rollout: pins: minRevision: 3`, policy.Rollout{}, `t.cue:2:10: rollout.pins: unknown field "minRevision" (newest)`},
		{"unknown field", `rollout: {strategy: "Progressive", soakTime: "30s"}`, policy.Rollout{}, `t.cue:2:36: rollout.soakTime: unknown field (the rollout block has: strategy, waves, progressDeadline, maxFailures, allowDeletions, canary, pins, soak, analysis, freeze)`},
		{"misspelt field", `rollout: maxFailure: 3`, policy.Rollout{}, `t.cue:2:10: rollout.maxFailure: unknown field (the rollout block has: strategy, waves, progressDeadline, maxFailures, allowDeletions, canary, pins, soak, analysis, freeze)`},
		{"pins not a policy", `rollout: pins: true`, policy.Rollout{}, `t.cue:2:10: rollout.pins: must be "Allow", "Forbid" or {newest: N}, not true`},
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
