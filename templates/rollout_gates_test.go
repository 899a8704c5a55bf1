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

// loadRollout compiles a template with the given rollout block.
func loadRollout(t *testing.T, rollout string) (policy.Rollout, error) {
	t.Helper()
	dir := t.TempDir()
	src := `parent: {apiVersion: "example.com/v1", kind: "P"}` + "\n" + rollout + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "t.cue"), []byte(src), 0o644))
	set, err := Load(dir)
	if err != nil {
		return policy.Rollout{}, err
	}
	return set.Templates()[0].Rollout, nil
}

// TestRolloutGates: soak, analysis and freeze as written, and each bad
// value as an error at its field.
func TestRolloutGates(t *testing.T) {
	const p = `strategy: "Progressive", `
	for _, tt := range []struct {
		name, rollout string
		check         func(t *testing.T, r policy.Rollout)
		err           string
	}{
		{"soak", `rollout: {` + p + `waves: [1, "100%"], soak: "30s"}`, func(t *testing.T, r policy.Rollout) {
			assert.Equal(t, 30*time.Second, r.Soak)
			assert.Equal(t, 30*time.Second, r.SoakOf(0))
			assert.Equal(t, 30*time.Second, r.SoakOf(1))
		}, ""},
		{"soak per wave", `rollout: {` + p + `waves: [{share: 1, soak: "1m"}, "50%", {share: "100%", soak: "0s"}], soak: "10s"}`, func(t *testing.T, r policy.Rollout) {
			assert.Equal(t, []policy.Wave{{Count: 1, Soak: time.Minute, OwnSoak: true}, {Percent: 50}, {Percent: 100, OwnSoak: true}}, r.Waves)
			assert.Equal(t, time.Minute, r.SoakOf(0))
			assert.Equal(t, 10*time.Second, r.SoakOf(1))
			assert.Equal(t, time.Duration(0), r.SoakOf(2))
		}, ""},
		{"analysis", `rollout: {` + p + `soak: "1m", analysis: [{name: "errors", query: "sum(rate(e{kind=\"{{kind}}\"}[1m]))", condition: "< 0.05"}]}`, func(t *testing.T, r policy.Rollout) {
			assert.Equal(t, []policy.AnalysisCheck{{Name: "errors", Query: `sum(rate(e{kind="{{kind}}"}[1m]))`, Condition: policy.Condition{Op: "<", Bound: 0.05}}}, r.Analysis)
		}, ""},
		{"freeze", `rollout: {` + p + `freeze: [{schedule: "0 22 * * 5", duration: "60h", timeZone: "Europe/Berlin"}, {start: "2026-12-24T00:00:00Z", end: "2026-12-27T00:00:00Z"}]}`, func(t *testing.T, r policy.Rollout) {
			require.Len(t, r.Freeze, 2)
			assert.Equal(t, "0 22 * * 5", r.Freeze[0].Schedule)
			assert.Equal(t, 60*time.Hour, r.Freeze[0].Duration)
			assert.Equal(t, time.Date(2026, 12, 27, 0, 0, 0, 0, time.UTC), r.Freeze[1].End.UTC())
		}, ""},
		{"bad soak", `rollout: {` + p + `soak: "a while"}`, nil, `t.cue:2:36: rollout.soak: must be a duration such as "30s" or "10m", not "a while"`},
		{"bad wave soak", `rollout: {` + p + `waves: [{share: 1, soak: 3}, "100%"]}`, nil, `t.cue:2:55: rollout.waves[0].soak: must be a duration such as "30s" or "10m", not 3`},
		{"wave without share", `rollout: {` + p + `waves: [{soak: "1m"}, "100%"]}`, nil, `t.cue:2:44: rollout.waves[0]: a wave written as a struct needs its share: a count (1) or a share ("10%")`},
		{"soak on immediate", `rollout: soak: "1m"`, nil, `t.cue:2:10: rollout.soak: holds waves, and strategy Immediate has none: use strategy: "Progressive"`},
		{"analysis without soak", `rollout: {` + p + `analysis: [{name: "e", query: "up", condition: "== 1"}]}`, nil, `t.cue:2:36: rollout.analysis: runs during each wave's soak, and wave 1 (1) has none: declare rollout.soak, or a soak for that wave`},
		{"bad condition", `rollout: {` + p + `soak: "1m", analysis: [{name: "e", query: "up", condition: "about 1"}]}`, nil, `t.cue:2:84: rollout.analysis[0].condition: condition "about 1" must be an operator (<, <=, >, >=, ==, !=) and a number, as "< 0.05"`},
		{"condition not a number", `rollout: {` + p + `soak: "1m", analysis: [{name: "e", query: "up", condition: "< x"}]}`, nil, `t.cue:2:84: rollout.analysis[0].condition: condition "< x": "x" is not a number`},
		{"empty query", `rollout: {` + p + `soak: "1m", analysis: [{name: "e", query: "", condition: "< 1"}]}`, nil, `t.cue:2:71: rollout.analysis[0].query: must be a non-empty string, not ""`},
		{"duplicate names", `rollout: {` + p + `soak: "1m", analysis: [{name: "e", query: "up", condition: "< 1"}, {name: "e", query: "up", condition: "< 1"}]}`, nil, `t.cue:2:104: rollout.analysis[1].name: "e" names two checks`},
		{"check without condition", `rollout: {` + p + `soak: "1m", analysis: [{name: "e", query: "up"}]}`, nil, `t.cue:2:59: rollout.analysis[0]: needs a condition such as "< 0.05"`},
		{"bad cron", `rollout: {` + p + `freeze: [{schedule: "every friday", duration: "1h"}]}`, nil, `t.cue:2:46: rollout.freeze[0].schedule: "every friday" is not a cron schedule such as "0 22 * * 5" (minute hour day month weekday): expected exactly 5 fields, found 2: [every friday]`},
		{"time zone in the schedule", `rollout: {` + p + `freeze: [{schedule: "CRON_TZ=Europe/Berlin 0 22 * * 5", duration: "1h"}]}`, nil, `t.cue:2:46: rollout.freeze[0].schedule: "CRON_TZ=Europe/Berlin 0 22 * * 5": the time zone goes in timeZone`},
		{"bad time zone", `rollout: {` + p + `freeze: [{schedule: "0 22 * * 5", duration: "1h", timeZone: "Mars/Olympus"}]}`, nil, `t.cue:2:86: rollout.freeze[0].timeZone: "Mars/Olympus" is not a time zone such as "Europe/Berlin"`},
		{"bad duration", `rollout: {` + p + `freeze: [{schedule: "0 22 * * 5", duration: "forever"}]}`, nil, `t.cue:2:70: rollout.freeze[0].duration: must be a positive duration such as "60h", how long each window lasts, not "forever"`},
		{"no duration", `rollout: {` + p + `freeze: [{schedule: "0 22 * * 5"}]}`, nil, `t.cue:2:45: rollout.freeze[0]: needs a duration such as "60h", how long each window lasts`},
		{"end before start", `rollout: {` + p + `freeze: [{start: "2026-12-27T00:00:00Z", end: "2026-12-24T00:00:00Z"}]}`, nil, `t.cue:2:77: rollout.freeze[0].end: must be after start (2026-12-27T00:00:00Z)`},
		{"bad start", `rollout: {` + p + `freeze: [{start: "Christmas", end: "2026-12-24T00:00:00Z"}]}`, nil, `t.cue:2:46: rollout.freeze[0].start: "Christmas" is not a time in RFC 3339, as "2026-12-24T00:00:00Z"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := loadRollout(t, tt.rollout)
			if tt.err != "" {
				require.Error(t, err)
				assert.Equal(t, tt.err, err.Error())
				return
			}
			require.NoError(t, err)
			tt.check(t, r)
		})
	}
}

// TestFrozenUntil: a fixed window, a weekly one in its time zone, and
// windows that follow one another without a gap are one freeze.
func TestFrozenUntil(t *testing.T) {
	r, err := loadRollout(t, `rollout: {strategy: "Progressive", freeze: [
	{schedule: "0 22 * * 5", duration: "60h", timeZone: "Europe/Berlin"},
	{start: "2026-12-24T00:00:00Z", end: "2026-12-27T00:00:00Z"},
	{start: "2026-12-27T00:00:00Z", end: "2026-12-28T00:00:00Z"},
]}`)
	require.NoError(t, err)
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	for _, tt := range []struct {
		name   string
		now    time.Time
		until  time.Time
		frozen bool
	}{
		// Friday 4 December 2026, 21:59 in Berlin: not yet.
		{"before the weekend", time.Date(2026, 12, 4, 21, 59, 0, 0, berlin), time.Time{}, false},
		{"friday night", time.Date(2026, 12, 4, 22, 0, 0, 0, berlin), time.Date(2026, 12, 7, 10, 0, 0, 0, berlin), true},
		{"sunday", time.Date(2026, 12, 6, 12, 0, 0, 0, berlin), time.Date(2026, 12, 7, 10, 0, 0, 0, berlin), true},
		{"monday morning, over", time.Date(2026, 12, 7, 10, 0, 0, 0, berlin), time.Time{}, false},
		// Christmas 2026 is a Friday: the fixed windows run into the
		// weekend's, which ends on Monday morning.
		{"christmas, then the next windows", time.Date(2026, 12, 25, 12, 0, 0, 0, time.UTC), time.Date(2026, 12, 28, 10, 0, 0, 0, berlin), true},
		{"christmas eve", time.Date(2026, 12, 24, 12, 0, 0, 0, time.UTC), time.Date(2026, 12, 28, 10, 0, 0, 0, berlin), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			until, frozen := r.FrozenUntil(tt.now)
			assert.Equal(t, tt.frozen, frozen)
			if tt.frozen {
				assert.True(t, tt.until.Equal(until), "until %s, want %s", until, tt.until)
			}
		})
	}
}
