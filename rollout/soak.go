package rollout

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/revisions"
	"github.com/cuengine/engine/rollout/analysis"
	"github.com/cuengine/engine/templates/policy"
)

// The gates a wave passes after its parents are healthy on the target: a
// soak (they stay healthy for the policy's SoakOf the wave, the clock
// recorded on the revision so a new leader resumes it), the policy's
// analysis checks, run during the soak, and the freeze windows, in which
// no wave starts.

// Analyzer runs a rollout's analysis checks (package analysis, against a
// Prometheus server).
type Analyzer interface {
	Evaluate(ctx context.Context, check policy.AnalysisCheck, vars analysis.Vars) analysis.Result
}

// SetAnalyzer sets what runs the analysis checks; nil (the default) is no
// Prometheus: a wave whose policy declares checks holds. Call it before
// Init.
func (ro *Rollout) SetAnalyzer(a Analyzer) { ro.analyzer = a }

// soakState is the coordinator's memory of the wave's analysis: the
// latest result of each check, and when they ran.
type soakState struct {
	results    []analysis.Result
	analyzedAt time.Time
	// held is the hold last announced with an event, so a steady hold
	// is announced once.
	held string
}

// gateOutcome is what the soak and analysis make of a healthy wave.
type gateOutcome struct {
	passed bool
	// note says why it has not passed: soaking, or held.
	note string
	// rolledBack: an analysis check failed and the revision was rolled back.
	rolledBack bool
}

// analysisEvery is how often the checks run during a soak of d: about
// five times, at least every second and at most every 30 seconds (and
// once more when the soak ends).
func analysisEvery(d time.Duration) time.Duration {
	return min(max(d/5, time.Second), 30*time.Second)
}

// soakGate runs the soak and analysis of the wave in progress, whose
// moved parents are all healthy on the target at now.
func (ro *Rollout) soakGate(ctx context.Context, parents []unstructured.Unstructured, now time.Time) (gateOutcome, error) {
	policy := ro.target.tpl.Rollout
	soak := policy.SoakOf(ro.target.Wave)
	if soak == 0 && len(policy.Analysis) == 0 {
		return gateOutcome{passed: true}, nil
	}
	if ro.target.SoakSince.IsZero() {
		ro.target.SoakSince = now
		ro.soaking = soakState{}
		ro.event(corev1.EventTypeNormal, "WaveSoaking", "wave %d of %d of revision %d: every object is healthy; soaking for %s", ro.target.Wave+1, len(policy.Waves), ro.target.Number, soak)
		if err := ro.store.Record(ctx, ro.target.Revision); err != nil {
			return gateOutcome{}, err
		}
	}
	since := ro.target.SoakSince
	ends := since.Add(soak)
	elapsed := !now.Before(ends)
	clock := fmt.Sprintf("soaking %s since %s, until %s", soak, since.UTC().Format(time.RFC3339), ends.UTC().Format(time.RFC3339))
	if elapsed {
		clock = fmt.Sprintf("soaked %s since %s", soak, since.UTC().Format(time.RFC3339))
	}
	if len(policy.Analysis) == 0 {
		return gateOutcome{passed: elapsed, note: clock}, nil
	}
	if ro.analyzer == nil {
		names := make([]string, len(policy.Analysis))
		for i, c := range policy.Analysis {
			names[i] = c.Name
		}
		held := fmt.Sprintf("held: the template declares analysis (%s) and the engine has no Prometheus to run it (engine run --prometheus-url)", strings.Join(names, ", "))
		ro.announceHold(held)
		return gateOutcome{note: clock + "; " + held}, nil
	}
	// Run the checks every analysisEvery, and once more when the soak
	// has ended: a wave passes on results from its end.
	s := &ro.soaking
	if s.analyzedAt.IsZero() || now.Sub(s.analyzedAt) >= analysisEvery(soak) || (elapsed && s.analyzedAt.Before(ends)) {
		s.results = ro.analyze(ctx, policy.Analysis)
		s.analyzedAt = now
		lines := make([]string, len(s.results))
		for i, r := range s.results {
			lines[i] = r.Message
		}
		if !slices.Equal(lines, ro.target.Analysis) {
			ro.target.Analysis = lines
			if err := ro.store.Record(ctx, ro.target.Revision); err != nil {
				return gateOutcome{}, err
			}
		}
	}
	var held []string
	for _, r := range s.results {
		switch r.Verdict {
		case analysis.Failed:
			return gateOutcome{rolledBack: true}, ro.rollBack(ctx, parents, fmt.Sprintf("wave %d of %d: %s", ro.target.Wave+1, len(policy.Waves), r.Message))
		case analysis.Held:
			held = append(held, r.Message)
		}
	}
	if len(held) > 0 {
		note := clock + "; held: " + strings.Join(held, "; ")
		if elapsed {
			ro.announceHold(note)
			note += " (the wave waits: no data is not success)"
		}
		return gateOutcome{note: note}, nil
	}
	ro.soaking.held = ""
	return gateOutcome{passed: elapsed, note: clock}, nil
}

// analyze runs every check of the policy for the wave in progress.
func (ro *Rollout) analyze(ctx context.Context, checks []policy.AnalysisCheck) []analysis.Result {
	vars := analysis.Vars{Kind: ro.gvk.GroupKind().String(), Revision: strconv.FormatInt(ro.target.Number, 10), Wave: ro.target.Wave + 1}
	out := make([]analysis.Result, 0, len(checks))
	for _, c := range checks {
		out = append(out, ro.analyzer.Evaluate(ctx, c, vars))
	}
	return out
}

// announceHold records an event when the wave starts holding for a new
// reason: a steady hold is announced once.
func (ro *Rollout) announceHold(why string) {
	// The reason without the clock, which moves.
	key := why
	if i := strings.Index(why, "held: "); i >= 0 {
		key = why[i:]
	}
	if ro.soaking.held == key {
		return
	}
	ro.soaking.held = key
	ro.event(corev1.EventTypeWarning, "WaveHeld", "revision %d, wave %d: %s", ro.target.Number, ro.target.Wave+1, key)
}

// endSoak forgets the wave's soak and analysis, as the next wave starts.
func (ro *Rollout) endSoak() {
	ro.target.SoakSince, ro.target.Analysis = time.Time{}, nil
	ro.soaking = soakState{}
}

// soakRegressions returns failures (the health gates', "namespace/name:
// why") with the moved parents that were healthy when the soak started and
// are not any longer first: reconciled on the target at their generation
// and not Synced and Ready. A parent whose newest generation is not
// reconciled yet is waited for, not counted. A parent is listed once.
func soakRegressions(moved []*unstructured.Unstructured, moves map[types.UID]move, hash string, failures []string) []string {
	var out []string
	unhealthy := map[string]bool{}
	for _, p := range moved {
		name := parentName(p)
		if moves[p.GetUID()].failingBefore {
			continue
		}
		if _, h := contract.ParentRevision(p); h != hash || !contract.GenerationObserved(p) || revisions.ReadyOn(p, hash) {
			continue
		}
		why := "not Ready"
		for _, c := range []string{contract.ConditionSynced, contract.ConditionReady} {
			if cond := contract.FindCondition(p, c); cond == nil || cond.Status != metav1.ConditionTrue {
				why = c + "=Unknown"
				if cond != nil {
					why = fmt.Sprintf("%s=%s %s: %s", c, cond.Status, cond.Reason, cond.Message)
				}
				break
			}
		}
		unhealthy[name] = true
		out = append(out, name+": turned unhealthy during the soak: "+why)
	}
	for _, f := range failures {
		if name, _, _ := strings.Cut(f, ": "); !unhealthy[name] {
			out = append(out, f)
		}
	}
	return out
}

// frozenNote says until when a wave waits for a freeze, or "" when none
// holds it at now.
func frozenNote(policy policy.Rollout, now time.Time) string {
	until, frozen := policy.FrozenUntil(now)
	if !frozen {
		return ""
	}
	return "frozen until " + until.UTC().Format(time.RFC3339)
}
