package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/revisions"
	"github.com/cuengine/engine/templates"
)

// phasePaused is how status shows a Progressing revision that a user
// paused: the engine records no phase for it.
const phasePaused = "Paused"

// fleetRevision is one revision in `engine rollout status`.
type fleetRevision struct {
	Number int64  `json:"number"`
	Hash   string `json:"hash"`
	// Phase is the revision's rollout phase, Paused, or "" for a revision
	// that objects report but that is no longer stored.
	Phase string `json:"phase"`
	// Wave is the wave in progress (1-based) out of Waves, for a revision
	// that has started rolling out; 0 otherwise, or when its template
	// cannot be read back.
	Wave  int `json:"wave,omitempty"`
	Waves int `json:"waves,omitempty"`
	// Objects run the revision; Ready of them are healthy on it by the
	// rule the rollout's health gates use (revisions.ReadyOn: reconciled
	// at their current generation, Synced and Ready); Pinned are pinned to
	// it (they may run another one until the engine reconciles them);
	// Stalled of them wait for a person (their Stalled condition).
	Objects int    `json:"objects"`
	Ready   int    `json:"ready"`
	Stalled int    `json:"stalled"`
	Pinned  int    `json:"pinned"`
	Target  bool   `json:"target,omitempty"`
	Message string `json:"message,omitempty"`
	// FailingBefore are the objects ("namespace/name") that were not
	// healthy on their previous revision when the rollout moved them to
	// this one: the health gates do not count them against it.
	FailingBefore []string `json:"failingBefore,omitempty"`
}

// fleetStatus is `engine rollout status`: the revisions the kind's objects
// run, and the target's rollout.
type fleetStatus struct {
	Kind              string          `json:"kind"`
	RevisionNamespace string          `json:"revisionNamespace"`
	Objects           int             `json:"objects"`
	Target            fleetRevision   `json:"target"`
	Revisions         []fleetRevision `json:"revisions"`
	// Unrevisioned objects report no revision (not reconciled yet).
	Unrevisioned int `json:"unrevisioned,omitempty"`
	// PinnedToMissing counts objects pinned to revision numbers that are
	// not stored; BadPins objects whose pin is not a number.
	PinnedToMissing map[int64]int `json:"pinnedToMissing,omitempty"`
	BadPins         int           `json:"badPins,omitempty"`
}

// fleetOf counts, per revision, the objects that run it, are healthy on
// it (revisions.ReadyOn), or are pinned to it. The rows are the revisions in use and the target,
// by number. waves returns the number of waves of a revision's rollout
// policy (0 when unknown).
func fleetOf(kr *kindRevisions, parents []unstructured.Unstructured, waves func(revisions.Revision) int) fleetStatus {
	st := fleetStatus{Kind: kr.Kind, RevisionNamespace: kr.Namespace, Objects: len(parents)}
	rows := map[string]*fleetRevision{}
	byNumber := map[int64]*fleetRevision{}
	row := func(rev revisions.Revision) *fleetRevision {
		if r := rows[rev.Hash]; r != nil {
			return r
		}
		r := &fleetRevision{Number: rev.Number, Hash: rev.Hash, Phase: displayPhase(rev), Message: rev.Message, FailingBefore: rev.FailingBefore}
		r.Wave, r.Waves = waveOf(rev, waves)
		rows[rev.Hash] = r
		byNumber[rev.Number] = r
		return r
	}
	stored := map[string]revisions.Revision{}
	storedNumbers := map[int64]revisions.Revision{}
	for _, rev := range kr.Revisions {
		stored[rev.Hash] = rev
		storedNumbers[rev.Number] = rev
	}
	target := row(kr.target())
	target.Target = true
	for i := range parents {
		p := &parents[i]
		if pin, err := contract.PinnedRevision(p); err != nil {
			st.BadPins++
		} else if pin > 0 {
			if rev, ok := storedNumbers[pin]; ok {
				row(rev).Pinned++
			} else {
				if st.PinnedToMissing == nil {
					st.PinnedToMissing = map[int64]int{}
				}
				st.PinnedToMissing[pin]++
			}
		}
		number, hash := contract.ParentRevision(p)
		if hash == "" {
			st.Unrevisioned++
			continue
		}
		rev, ok := stored[hash]
		if !ok {
			rev = revisions.Revision{Number: number, Hash: hash}
		}
		r := row(rev)
		if !ok {
			r.Phase = ""
		}
		r.Objects++
		if revisions.ReadyOn(p, hash) {
			r.Ready++
		}
		if contract.ConditionIs(p, contract.ConditionStalled, metav1.ConditionTrue) {
			r.Stalled++
		}
	}
	for _, r := range rows {
		st.Revisions = append(st.Revisions, *r)
	}
	slices.SortFunc(st.Revisions, func(a, b fleetRevision) int {
		return cmp.Or(cmp.Compare(a.Number, b.Number), cmp.Compare(a.Hash, b.Hash))
	})
	st.Target = *target
	return st
}

// displayPhase is a revision's phase as status shows it.
func displayPhase(rev revisions.Revision) string {
	if rev.Phase == revisions.PhaseProgressing && rev.Paused {
		return phasePaused
	}
	return string(rev.Phase)
}

// waveOf returns the wave a revision's rollout is at (1-based) and how
// many its policy has, once it has started: 0, 0 before, or when waves
// cannot tell. A complete revision is at its last wave (the engine records
// the first revision of a kind as complete at wave 0).
func waveOf(rev revisions.Revision, waves func(revisions.Revision) int) (wave, of int) {
	switch rev.Phase {
	case revisions.PhaseProgressing, revisions.PhaseComplete, revisions.PhaseRolledBack:
	default:
		return 0, 0
	}
	n := waves(rev)
	if n == 0 {
		return 0, 0
	}
	if rev.Phase == revisions.PhaseComplete {
		return n, n
	}
	return min(rev.Wave+1, n), n
}

// printStatus writes the fleet view as a table, then what the target's
// rollout is waiting for.
func printStatus(w io.Writer, st fleetStatus, cmdKind string) {
	fmt.Fprintf(w, "%s: %d objects, revisions in namespace %s\n", st.Kind, st.Objects, st.RevisionNamespace)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REVISION\tHASH\tPHASE\tWAVE\tOBJECTS\tREADY\tSTALLED\tPINNED")
	for _, r := range st.Revisions {
		number := strconv.FormatInt(r.Number, 10)
		if r.Target {
			number += "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\n", number, r.Hash, cmp.Or(r.Phase, "(not stored)"), waveString(r), r.Objects, r.Ready, r.Stalled, r.Pinned)
	}
	tw.Flush()
	if st.Unrevisioned > 0 {
		fmt.Fprintf(w, "%s no revision yet (not reconciled since the engine records revisions)\n", count(st.Unrevisioned, "object reports", "objects report"))
	}
	for _, n := range slices.Sorted(maps.Keys(st.PinnedToMissing)) {
		fmt.Fprintf(w, "%s pinned to revision %d, which is not stored: the engine does not reconcile them (RevisionNotFound)\n", count(st.PinnedToMissing[n], "object is", "objects are"), n)
	}
	if st.BadPins > 0 {
		fmt.Fprintf(w, "%s an %s annotation that is not a revision number\n", count(st.BadPins, "object has", "objects have"), contract.AnnotationTemplateRevision)
	}
	t := st.Target
	defer printFailingBefore(w, t)
	switch t.Phase {
	case string(revisions.PhaseHeld):
		fmt.Fprintf(w, "revision %d (*) is held: %s\n`engine rollout resume %s` confirms it\n", t.Number, t.Message, cmdKind)
	case phasePaused:
		fmt.Fprintf(w, "revision %d (*) is paused at wave %s: `engine rollout resume %s` continues it\n", t.Number, waveString(t), cmdKind)
	case string(revisions.PhaseRolledBack):
		fmt.Fprintf(w, "revision %d (*) was rolled back: %s\n", t.Number, t.Message)
	default:
		fmt.Fprintf(w, "revision %d (*) is %s: %s\n", t.Number, t.Phase, cmp.Or(t.Message, "the engine has not looked at it yet"))
	}
}

// maxFailingBeforeShown bounds the objects status names as failing
// before the move.
const maxFailingBeforeShown = 10

// printFailingBefore names the objects the target's health gates do not
// count: they were failing before they moved.
func printFailingBefore(w io.Writer, t fleetRevision) {
	n := len(t.FailingBefore)
	if n == 0 {
		return
	}
	names := strings.Join(t.FailingBefore[:min(n, maxFailingBeforeShown)], ", ")
	if n > maxFailingBeforeShown {
		names += fmt.Sprintf(" and %d more", n-maxFailingBeforeShown)
	}
	fmt.Fprintf(w, "failing before the move to revision %d, not counted against it: %s\n", t.Number, names)
}

// pinView is what history says about pins: the objects pinned to each
// revision number, and the newest revision's rollout policy for pins (nil
// when this engine cannot read its template back).
type pinView struct {
	pinned map[int64]int
	pins   *templates.Pins
	newest int64
}

// refused says why pins to rev are not followed, "" when they are or
// when the policy is unknown (revisions.PinRefused).
func (pv pinView) refused(rev revisions.Revision) string {
	if pv.pins == nil {
		return ""
	}
	if err := revisions.PinRefused(*pv.pins, pv.newest, rev); err != nil {
		return err.Error()
	}
	return ""
}

// printHistory writes every stored revision, oldest first, with the
// objects pinned to each, then which revisions pins may select.
func printHistory(w io.Writer, kr *kindRevisions, objectsOn map[string]int, pv pinView, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REVISION\tHASH\tPHASE\tCREATED\tOBJECTS\tPINNED\tMESSAGE")
	for _, rev := range kr.Revisions {
		pinned := strconv.Itoa(pv.pinned[rev.Number])
		if pv.pinned[rev.Number] > 0 && pv.refused(rev) != "" {
			pinned += " (refused)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\n", rev.Number, rev.Hash, displayPhase(rev), duration.HumanDuration(now.Sub(rev.Created)), objectsOn[rev.Hash], pinned, rev.Message)
	}
	tw.Flush()
	switch {
	case pv.pins == nil:
	case pv.pins.Forbid:
		fmt.Fprintf(w, "pins: none followed (rollout: %s)\n", pv.pins)
	default:
		fmt.Fprintf(w, "pins: followed to revisions %d to %d (rollout: %s), not to a RolledBack or Held one; a refused pin keeps no revision from pruning\n", pv.pins.Oldest(pv.newest), pv.newest, pv.pins)
	}
}

// historyEntry is one revision in `engine rollout history -o json`.
type historyEntry struct {
	Name    string    `json:"name"`
	Number  int64     `json:"number"`
	Hash    string    `json:"hash"`
	Phase   string    `json:"phase"`
	Created time.Time `json:"created"`
	Objects int       `json:"objects"`
	// Pinned counts the objects pinned to it; PinRefused says why the
	// engine does not follow those pins (revisions.PinRefused).
	Pinned     int    `json:"pinned,omitempty"`
	PinRefused string `json:"pinRefused,omitempty"`
	Message    string `json:"message,omitempty"`
	Paused     bool   `json:"paused,omitempty"`
	// Approved and Undo are requests the engine has not acted on yet.
	Approved bool `json:"approved,omitempty"`
	Undo     bool `json:"undo,omitempty"`
}

func historyOf(kr *kindRevisions, objectsOn map[string]int, pv pinView) []historyEntry {
	out := make([]historyEntry, 0, len(kr.Revisions))
	for _, rev := range kr.Revisions {
		e := historyEntry{
			Name: rev.Name, Number: rev.Number, Hash: rev.Hash, Phase: displayPhase(rev), Created: rev.Created,
			Objects: objectsOn[rev.Hash], Pinned: pv.pinned[rev.Number], Message: rev.Message, Paused: rev.Paused, Approved: rev.Approved, Undo: rev.Undo,
		}
		if e.Pinned > 0 {
			e.PinRefused = pv.refused(rev)
		}
		out = append(out, e)
	}
	return out
}

// pinnedTo counts the objects pinned to each revision number.
func pinnedTo(parents []unstructured.Unstructured) map[int64]int {
	out := map[int64]int{}
	for i := range parents {
		if n, err := contract.PinnedRevision(&parents[i]); err == nil && n > 0 {
			out[n]++
		}
	}
	return out
}

// objectsOn counts the objects that report each revision hash.
func objectsOn(parents []unstructured.Unstructured) map[string]int {
	out := map[string]int{}
	for i := range parents {
		if _, hash := contract.ParentRevision(&parents[i]); hash != "" {
			out[hash]++
		}
	}
	return out
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// waveString is "2/3", or "-" before a rollout starts.
func waveString(r fleetRevision) string {
	if r.Waves == 0 {
		return "-"
	}
	return fmt.Sprintf("%d/%d", r.Wave, r.Waves)
}

// count is "1 object is" or "3 objects are".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
