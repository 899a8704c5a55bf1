package revisions

import (
	"cmp"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/contract"
)

// The fleet view: what `engine rollout status` shows of a kind, computed
// from its stored revisions and its parents as read from the cluster.

// PhasePausedShown is how status shows a Progressing revision that a user
// paused: the engine records no phase for it.
const PhasePausedShown = "Paused"

// FleetRevision is one revision in `engine rollout status`.
type FleetRevision struct {
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
	// rule the rollout's health gates use (ReadyOn: reconciled
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
	// SoakSince is when the wave in progress started its soak; Soak its
	// length and SoakLeft what remains of it, as `engine rollout status`
	// reads the revision's template (empty when it cannot).
	SoakSince *time.Time `json:"soakSince,omitempty"`
	Soak      string     `json:"soak,omitempty"`
	SoakLeft  string     `json:"soakLeft,omitempty"`
	// Analysis are the latest results of the wave's analysis checks.
	Analysis []string `json:"analysis,omitempty"`
	// NextWaveAt is when a freeze window of the revision's rollout ends:
	// no wave starts before.
	NextWaveAt *time.Time `json:"nextWaveAt,omitempty"`
}

// Fleet is `engine rollout status`: the revisions the kind's objects
// run, and the target's rollout.
type Fleet struct {
	Kind              string          `json:"kind"`
	RevisionNamespace string          `json:"revisionNamespace"`
	Objects           int             `json:"objects"`
	Target            FleetRevision   `json:"target"`
	Revisions         []FleetRevision `json:"revisions"`
	// Unrevisioned objects report no revision (not reconciled yet).
	Unrevisioned int `json:"unrevisioned,omitempty"`
	// PinnedToMissing counts objects pinned to revision numbers that are
	// not stored; BadPins objects whose pin is not a number.
	PinnedToMissing map[int64]int `json:"pinnedToMissing,omitempty"`
	BadPins         int           `json:"badPins,omitempty"`
}

// FleetOf counts, per revision, the objects that run it, are healthy on
// it (ReadyOn), or are pinned to it. The rows are the revisions in use and the target,
// by number. waves returns the number of waves of a revision's rollout
// policy (0 when unknown).
func FleetOf(kr *Stored, parents []unstructured.Unstructured, waves func(Revision) int) Fleet {
	st := Fleet{Kind: kr.Kind, RevisionNamespace: kr.Namespace, Objects: len(parents)}
	rows := map[string]*FleetRevision{}
	byNumber := map[int64]*FleetRevision{}
	row := func(rev Revision) *FleetRevision {
		if r := rows[rev.Hash]; r != nil {
			return r
		}
		r := &FleetRevision{Number: rev.Number, Hash: rev.Hash, Phase: DisplayPhase(rev), Message: rev.Message, FailingBefore: rev.FailingBefore, Analysis: rev.Analysis}
		if !rev.SoakSince.IsZero() {
			since := rev.SoakSince
			r.SoakSince = &since
		}
		r.Wave, r.Waves = WaveOf(rev, waves)
		rows[rev.Hash] = r
		byNumber[rev.Number] = r
		return r
	}
	stored := map[string]Revision{}
	storedNumbers := map[int64]Revision{}
	for _, rev := range kr.Revisions {
		stored[rev.Hash] = rev
		storedNumbers[rev.Number] = rev
	}
	target := row(kr.Target())
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
			rev = Revision{Number: number, Hash: hash}
		}
		r := row(rev)
		if !ok {
			r.Phase = ""
		}
		r.Objects++
		if ReadyOn(p, hash) {
			r.Ready++
		}
		if contract.ConditionIs(p, contract.ConditionStalled, metav1.ConditionTrue) {
			r.Stalled++
		}
	}
	for _, r := range rows {
		st.Revisions = append(st.Revisions, *r)
	}
	slices.SortFunc(st.Revisions, func(a, b FleetRevision) int {
		return cmp.Or(cmp.Compare(a.Number, b.Number), cmp.Compare(a.Hash, b.Hash))
	})
	st.Target = *target
	return st
}

// DisplayPhase is a revision's phase as status shows it.
func DisplayPhase(rev Revision) string {
	if rev.Phase == PhaseProgressing && rev.Paused {
		return PhasePausedShown
	}
	return string(rev.Phase)
}

// WaveOf returns the wave a revision's rollout is at (1-based) and how
// many its policy has, once it has started: 0, 0 before, or when waves
// cannot tell. A complete revision is at its last wave (the engine records
// the first revision of a kind as complete at wave 0).
func WaveOf(rev Revision, waves func(Revision) int) (wave, of int) {
	switch rev.Phase {
	case PhaseProgressing, PhaseComplete, PhaseRolledBack:
	default:
		return 0, 0
	}
	n := waves(rev)
	if n == 0 {
		return 0, 0
	}
	if rev.Phase == PhaseComplete {
		return n, n
	}
	return min(rev.Wave+1, n), n
}

// PinnedTo counts the objects pinned to each revision number.
func PinnedTo(parents []unstructured.Unstructured) map[int64]int {
	out := map[int64]int{}
	for i := range parents {
		if n, err := contract.PinnedRevision(&parents[i]); err == nil && n > 0 {
			out[n]++
		}
	}
	return out
}

// ObjectsOn counts the objects that report each revision hash.
func ObjectsOn(parents []unstructured.Unstructured) map[string]int {
	out := map[string]int{}
	for i := range parents {
		if _, hash := contract.ParentRevision(&parents[i]); hash != "" {
			out[hash]++
		}
	}
	return out
}
