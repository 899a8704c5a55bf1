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
	progressive := Rollout{Strategy: RolloutProgressive, Waves: []Wave{{Count: 1}, {Percent: 25}, {Percent: 100}}, ProgressDeadline: 2 * time.Minute, MaxFailures: 1}
	for _, tt := range []struct {
		name, rollout string
		want          Rollout
		err           string
	}{
		{"none", ``, DefaultRollout, ""},
		{"progressive defaults", `rollout: strategy: "Progressive"`, Rollout{Strategy: RolloutProgressive, Waves: defaultWaves, ProgressDeadline: 5 * time.Minute}, ""},
		{"progressive", `rollout: {strategy: "Progressive", waves: [1, "25%", "100%"], progressDeadline: "2m", maxFailures: 1}`, progressive, ""},
		{"allow deletions", `rollout: allowDeletions: true`, Rollout{Strategy: RolloutImmediate, Waves: DefaultRollout.Waves, ProgressDeadline: 5 * time.Minute, AllowDeletions: true}, ""},
		{"bad strategy", `rollout: strategy: "Canary"`, Rollout{}, `t.cue:2:10: rollout.strategy: must be "Immediate" or "Progressive", not "Canary"`},
		{"shrinking waves", `rollout: waves: ["50%", "10%", "100%"]`, Rollout{}, `t.cue:2:10: rollout.waves: waves are cumulative and must grow: 10% after 50%`},
		{"not ending at 100%", `rollout: waves: [1, "50%"]`, Rollout{}, `t.cue:2:10: rollout.waves: the last wave must be "100%" (every parent), not 50%`},
		{"bad share", `rollout: waves: ["150%"]`, Rollout{}, `t.cue:2:10: rollout.waves: a share of parents is written "1%" to "100%", not "150%"`},
		{"bad count", `rollout: waves: [0, "100%"]`, Rollout{}, `t.cue:2:10: rollout.waves: a count of parents must be a whole number of 1 or more, not 0`},
		{"bad deadline", `rollout: progressDeadline: "soon"`, Rollout{}, `t.cue:2:10: rollout.progressDeadline: must be a positive duration such as "2m", not "soon"`},
		{"negative failures", `rollout: maxFailures: -1`, Rollout{}, `t.cue:2:10: rollout.maxFailures: must be 0 or more, not -1`},
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
