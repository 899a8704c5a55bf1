package rollout

import (
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/revisions"
)

// The health gates judge regressions. A parent that was not healthy on the
// revision it ran (revisions.ReadyOn) when the rollout moved it says
// nothing about the new revision: whoever writes a parent can make it fail
// (its spec, or what its template reads), and one such parent must not
// veto a template change for the whole kind. It moves with its wave, is
// listed as failing before the move (the revision's FailingBefore, `engine
// rollout status`), and neither fails the gate nor holds the next wave.
// A parent healthy before that fails after is a regression, and counts.

// move is a parent the coordinator moved to the target.
type move struct {
	// since is when it was sent (or, moved by an earlier leader, when this
	// one first saw it on the target).
	since time.Time
	// failingBefore: it was not healthy on its previous revision.
	failingBefore bool
}

// failingBefore reports whether a parent about to move is not healthy on
// the revision it runs. A parent that runs none yet (never reconciled) has
// no "before": its failures count.
func failingBefore(p *unstructured.Unstructured) bool {
	_, hash := contract.ParentRevision(p)
	return hash != "" && !revisions.ReadyOn(p, hash)
}

// verdict is what the health gates make of the parents moved so far.
type verdict struct {
	// failures are the regressions: "namespace/name: why".
	failures []string
	// failingBefore are the moved parents that were not healthy before
	// they moved: "namespace/name", sorted.
	failingBefore []string
	// waiting counts the other moved parents not yet healthy on the target:
	// the next wave waits for them.
	waiting int
}

// judge applies the health gates to the moved parents (moves has an entry
// for each) on revision hash at now.
func judge(moved []*unstructured.Unstructured, moves map[types.UID]move, hash string, now time.Time, deadline time.Duration) verdict {
	var v verdict
	for _, p := range moved {
		m := moves[p.GetUID()]
		if m.failingBefore {
			v.failingBefore = append(v.failingBefore, parentName(p))
			continue
		}
		if msg := failedOn(p, hash, m.since, now, deadline); msg != "" {
			v.failures = append(v.failures, parentName(p)+": "+msg)
		}
		if !revisions.ReadyOn(p, hash) {
			v.waiting++
		}
	}
	slices.Sort(v.failingBefore)
	return v
}

// parentName is how the gates name a parent: "namespace/name".
func parentName(p *unstructured.Unstructured) string {
	return p.GetNamespace() + "/" + p.GetName()
}

// failedOn says why a parent moved to revision hash at since has failed
// its health gate, or returns "": Synced=False on the revision, or not
// healthy on it (revisions.ReadyOn) within the deadline.
func failedOn(p *unstructured.Unstructured, hash string, since, now time.Time, deadline time.Duration) string {
	_, h := contract.ParentRevision(p)
	if h == hash && contract.GenerationObserved(p) {
		if c := contract.FindCondition(p, contract.ConditionSynced); c != nil && c.Status == metav1.ConditionFalse {
			return fmt.Sprintf("Synced=False %s: %s", c.Reason, c.Message)
		}
		if revisions.ReadyOn(p, hash) {
			return ""
		}
	}
	if now.Sub(since) < deadline {
		return ""
	}
	msg := "not updated to the revision"
	if c := contract.FindCondition(p, contract.ConditionReady); h == hash && c != nil {
		msg = fmt.Sprintf("Ready=%s %s: %s", c.Status, c.Reason, c.Message)
	}
	return fmt.Sprintf("not Ready %s after its update (progressDeadline): %s", deadline, msg)
}

// recordFailingBefore adds names to a revision's FailingBefore, sorted,
// at most revisions.MaxFailingBefore; it reports whether the list changed.
func recordFailingBefore(rev *revisions.Revision, names []string) bool {
	out := slices.Clone(rev.FailingBefore)
	for _, n := range names {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	out = out[:min(len(out), revisions.MaxFailingBefore)]
	if slices.Equal(out, rev.FailingBefore) {
		return false
	}
	rev.FailingBefore = out
	return true
}
