package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/term"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/revisions"
	"github.com/cuengine/engine/templates/policy"
)

// printStatus writes the fleet view as a table, then what the target's
// rollout is waiting for.
func printStatus(w io.Writer, st revisions.Fleet, cmdKind string) {
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
	defer printGates(w, t)
	switch t.Phase {
	case string(revisions.PhaseHeld):
		fmt.Fprintf(w, "revision %d (*) is held: %s\n`engine rollout resume %s` confirms it\n", t.Number, t.Message, cmdKind)
	case revisions.PhasePausedShown:
		fmt.Fprintf(w, "revision %d (*) is paused at wave %s: `engine rollout resume %s` continues it\n", t.Number, waveString(t), cmdKind)
	case string(revisions.PhaseRolledBack):
		fmt.Fprintf(w, "revision %d (*) was rolled back: %s\n", t.Number, t.Message)
	default:
		fmt.Fprintf(w, "revision %d (*) is %s: %s\n", t.Number, t.Phase, cmp.Or(t.Message, "the engine has not looked at it yet"))
	}
}

// printGates says where the target's wave stands with its soak, its
// analysis checks and the freeze windows.
func printGates(w io.Writer, t revisions.FleetRevision) {
	if t.SoakSince != nil {
		since := t.SoakSince.UTC().Format(time.RFC3339)
		switch {
		case t.Soak == "":
			fmt.Fprintf(w, "soaking since %s\n", since)
		case t.SoakLeft == "0s":
			fmt.Fprintf(w, "soaked: %s since %s\n", t.Soak, since)
		default:
			fmt.Fprintf(w, "soaking since %s: %s of %s remaining\n", since, t.SoakLeft, t.Soak)
		}
	}
	for _, a := range t.Analysis {
		fmt.Fprintf(w, "%s\n", a)
	}
	if t.NextWaveAt != nil {
		fmt.Fprintf(w, "frozen: the next wave may start at %s\n", t.NextWaveAt.UTC().Format(time.RFC3339))
	}
}

// maxFailingBeforeShown bounds the objects status names as failing
// before the move.
const maxFailingBeforeShown = 10

// printFailingBefore names the objects the target's health gates do not
// count: they were failing before they moved.
func printFailingBefore(w io.Writer, t revisions.FleetRevision) {
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
	pins   *policy.Pins
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
func printHistory(w io.Writer, kr *revisions.Stored, objectsOn map[string]int, pv pinView, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REVISION\tHASH\tPHASE\tCREATED\tOBJECTS\tPINNED\tMESSAGE")
	for _, rev := range kr.Revisions {
		pinned := strconv.Itoa(pv.pinned[rev.Number])
		if pv.pinned[rev.Number] > 0 && pv.refused(rev) != "" {
			pinned += " (refused)"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\n", rev.Number, rev.Hash, revisions.DisplayPhase(rev), duration.HumanDuration(now.Sub(rev.Created)), objectsOn[rev.Hash], pinned, rev.Message)
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

func historyOf(kr *revisions.Stored, objectsOn map[string]int, pv pinView) []historyEntry {
	out := make([]historyEntry, 0, len(kr.Revisions))
	for _, rev := range kr.Revisions {
		e := historyEntry{
			Name: rev.Name, Number: rev.Number, Hash: rev.Hash, Phase: revisions.DisplayPhase(rev), Created: rev.Created,
			Objects: objectsOn[rev.Hash], Pinned: pv.pinned[rev.Number], Message: rev.Message, Paused: rev.Paused, Approved: rev.Approved, Undo: rev.Undo,
		}
		if e.Pinned > 0 {
			e.PinRefused = pv.refused(rev)
		}
		out = append(out, e)
	}
	return out
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// waveString is "2/3", or "-" before a rollout starts.
func waveString(r revisions.FleetRevision) string {
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

// watchStatus redraws the status whenever it changes, until the target
// revision's rollout ends: nil when it is Complete, an error when it
// rolled back. The revisions are read again each time, so a newer
// revision that supersedes the target is the one watched next.
func (o *rolloutOptions) watchStatus(ctx context.Context, w io.Writer, s *rolloutSession) error {
	f, isFile := w.(*os.File)
	tty := isFile && term.IsTerminal(int(f.Fd()))
	tick := time.NewTicker(rolloutPollInterval)
	defer tick.Stop()
	last := ""
	for {
		revs, err := revisions.Find(ctx, s.c, s.gvk.GroupKind(), s.revs.Namespace)
		if err != nil && ctx.Err() == nil {
			return err
		}
		parents, perr := s.parents(ctx)
		if perr != nil && ctx.Err() == nil {
			return perr
		}
		if err == nil && perr == nil {
			s.revs = revs
			var b strings.Builder
			printStatus(&b, s.fleet(parents, time.Now()), s.arg)
			if b.String() != last {
				switch {
				case tty:
					fmt.Fprint(w, "\x1b[H\x1b[2J") // home, clear: a redraw
				case last != "":
					fmt.Fprintf(w, "--- %s\n", time.Now().Format(time.TimeOnly))
				}
				fmt.Fprint(w, b.String())
				last = b.String()
			}
			switch target := s.revs.Target(); target.Phase {
			case revisions.PhaseComplete:
				return nil
			case revisions.PhaseRolledBack:
				return fmt.Errorf("%s rolled back: %s", revisionName(s.revs, target), target.Message)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
