package rollout

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/revisions"
	"github.com/cuengine/engine/templates/policy"
)

// step looks at the kind once and returns when to look again.
func (ro *Rollout) step(ctx context.Context) (time.Duration, error) {
	defer ro.publish()
	if err := ro.retarget(ctx, ro.kind.Template()); err != nil {
		return 0, err
	}
	if err := ro.refresh(ctx); err != nil {
		return 0, err
	}
	if !ro.moves() {
		// Nothing to move: no fleet list, which under sharding is a LIST
		// of every parent from the apiserver, every rolloutTickIdle.
		return rolloutTickIdle, nil
	}
	parents, err := ro.kind.Fleet(ctx)
	if err != nil {
		return 0, err
	}
	switch ro.target.Phase {
	case revisions.PhasePending:
		return rolloutTickActive, ro.start(ctx, parents)
	case revisions.PhaseHeld:
		if ro.target.Undo {
			// Rejected before any object ran it: nothing to move back.
			return rolloutTickIdle, ro.rollBack(ctx, parents, "undone while held (engine rollout undo): no object ran it", contract.AnnotationRolloutUndo)
		}
		if ro.target.Approved {
			return rolloutTickActive, ro.begin(ctx, parents, contract.AnnotationRolloutApproved)
		}
	case revisions.PhaseProgressing:
		return rolloutTickActive, ro.progress(ctx, parents)
	case revisions.PhaseComplete:
		if ro.target.Undo {
			return rolloutTickActive, ro.rollBack(ctx, parents, "undone (engine rollout undo)", contract.AnnotationRolloutUndo)
		}
	}
	return rolloutTickIdle, nil
}

// moves reports whether the target's phase has parents to move (or to look
// at) now, the cases of step that need the fleet.
func (ro *Rollout) moves() bool {
	switch t := ro.target; t.Phase {
	case revisions.PhasePending, revisions.PhaseProgressing:
		return true
	case revisions.PhaseHeld:
		return t.Undo || t.Approved
	case revisions.PhaseComplete:
		return t.Undo
	}
	return false
}

// refresh reads the users' requests (pause, approve, undo) from the
// target's ControllerRevision.
func (ro *Rollout) refresh(ctx context.Context) error {
	cr := &appsv1.ControllerRevision{}
	key := types.NamespacedName{Namespace: ro.store.Namespace, Name: ro.target.Name}
	if err := ro.store.Reader.Get(ctx, key, cr); err != nil {
		return fmt.Errorf("reading revision %d of %s: %w", ro.target.Number, contract.KindString(ro.gvk), err)
	}
	stored := revisions.RevisionOf(cr)
	ro.target.Paused, ro.target.Approved, ro.target.Undo = stored.Paused, stored.Approved, stored.Undo
	return nil
}

// start decides what happens to a new target: held when it would delete
// children the parents have, otherwise rolled out.
func (ro *Rollout) start(ctx context.Context, parents []unstructured.Unstructured) error {
	if ro.target.Approved {
		return ro.begin(ctx, parents, contract.AnnotationRolloutApproved) // confirmed in advance
	}
	if !ro.target.tpl.Rollout.AllowDeletions {
		held, err := ro.wouldDelete(ctx, parents)
		if err != nil {
			return err
		}
		if held.Deletes > 0 {
			ro.target.Phase = revisions.PhaseHeld
			ro.target.Message = held.Error()
			ro.target.HeldDeletes = held.Deletes
			ro.event(corev1.EventTypeWarning, "RevisionHeld", "%s", ro.target.Message)
			metricRollouts.WithLabelValues(contract.KindString(ro.gvk), string(revisions.PhaseHeld)).Inc()
			return ro.store.Record(ctx, ro.target.Revision)
		}
	}
	return ro.begin(ctx, parents)
}

// begin starts moving parents: all at once (Immediate), or the first wave.
func (ro *Rollout) begin(ctx context.Context, parents []unstructured.Unstructured, done ...string) error {
	if ro.target.tpl.Rollout.Strategy == policy.RolloutImmediate {
		return ro.complete(ctx, "rolled out to every object at once (strategy Immediate)", done...)
	}
	ro.target.Phase, ro.target.Wave = revisions.PhaseProgressing, 0
	ro.target.Message = fmt.Sprintf("wave 1 of %d", len(ro.target.tpl.Rollout.Waves))
	if err := ro.store.Record(ctx, ro.target.Revision, done...); err != nil {
		return err
	}
	metricRollouts.WithLabelValues(contract.KindString(ro.gvk), string(revisions.PhaseProgressing)).Inc()
	return ro.progress(ctx, parents)
}

// progress moves the parents of the current wave, checks their health, and
// starts the next wave once every parent moved so far is healthy on the
// target (revisions.ReadyOn), or was failing before it moved (gate.go).
func (ro *Rollout) progress(ctx context.Context, parents []unstructured.Unstructured) error {
	policy := ro.target.tpl.Rollout
	if ro.target.Undo {
		return ro.rollBack(ctx, parents, "undone (engine rollout undo)", contract.AnnotationRolloutUndo)
	}
	fleet := rolloutOrder(parents, policy.Canary)
	now := time.Now()
	var moved []*unstructured.Unstructured
	for _, p := range fleet {
		_, hash := contract.ParentRevision(p)
		_, sent := ro.moving[p.GetUID()]
		if !sent && hash != ro.target.Hash && movedTo(p) != ro.target.Hash {
			continue
		}
		if !sent {
			// Moved by an earlier leader: its clock starts now; whether it
			// was failing before is what that leader recorded.
			ro.moving[p.GetUID()] = move{since: now, failingBefore: slices.Contains(ro.target.FailingBefore, parentName(p))}
		}
		moved = append(moved, p)
	}
	v := judge(moved, ro.moving, ro.target.Hash, now, policy.ProgressDeadline)
	if !ro.target.SoakSince.IsZero() {
		// Healthy when the soak started: unhealthy now is a regression,
		// said so rather than as a missed progressDeadline.
		v.failures = soakRegressions(moved, ro.moving, ro.target.Hash, v.failures)
	}
	if allowed := policy.FailuresAllowed(len(fleet)); len(v.failures) > allowed {
		budget := policy.MaxFailuresString()
		if policy.MaxFailuresPercent > 0 {
			budget = fmt.Sprintf("%s, %d of %d objects", budget, allowed, len(fleet))
		}
		return ro.rollBack(ctx, parents, fmt.Sprintf("%d objects failed (more than maxFailures %s): %s",
			len(v.failures), budget, strings.Join(v.failures[:min(len(v.failures), 3)], "; ")))
	}
	wave := fmt.Sprintf("wave %d of %d", ro.target.Wave+1, len(policy.Waves))
	note := failingBeforeNote(len(v.failingBefore))
	if ro.target.Paused {
		ready := 0
		for _, p := range moved {
			if revisions.ReadyOn(p, ro.target.Hash) {
				ready++
			}
		}
		return ro.note(ctx, fmt.Sprintf("paused at wave %d of %d: %d of %d objects moved, %d Ready (engine rollout resume continues)",
			ro.target.Wave+1, len(policy.Waves), len(moved), len(fleet), ready)+note)
	}
	want := policy.Waves[ro.target.Wave].Of(len(fleet))
	if len(moved) < want {
		if ro.target.Wave == 0 && len(moved) == 0 {
			// No wave starts in a freeze window (soak.go).
			if frozen := frozenNote(policy, now); frozen != "" {
				return ro.note(ctx, wave+": "+frozen+"; the wave starts then"+note)
			}
		}
		if err := ro.note(ctx, wave+note); err != nil {
			return err
		}
		return ro.sendWave(ctx, fleet, want-len(moved), now)
	}
	if v.waiting > 0 {
		if !ro.target.SoakSince.IsZero() {
			return ro.note(ctx, fmt.Sprintf("%s: soaking since %s; %d objects not healthy", wave, ro.target.SoakSince.UTC().Format(time.RFC3339), v.waiting)+note)
		}
		return ro.note(ctx, wave+note)
	}
	if len(moved) > 0 { // no objects, nothing to soak
		gate, err := ro.soakGate(ctx, parents, now)
		if err != nil || gate.rolledBack {
			return err
		}
		if !gate.passed {
			return ro.note(ctx, wave+": "+gate.note+note)
		}
	}
	if ro.target.Wave+1 >= len(policy.Waves) {
		return ro.complete(ctx, fmt.Sprintf("rolled out in %d waves", len(policy.Waves))+note)
	}
	if frozen := frozenNote(policy, now); frozen != "" {
		// The wave passed; the next does not start in a freeze window,
		// and the health gates keep watching this one meanwhile.
		return ro.note(ctx, fmt.Sprintf("%s passed; %s, when wave %d starts", wave, frozen, ro.target.Wave+2)+note)
	}
	ro.target.Wave++
	ro.endSoak()
	ro.target.Message = fmt.Sprintf("wave %d of %d", ro.target.Wave+1, len(policy.Waves)) + note
	if err := ro.store.Record(ctx, ro.target.Revision); err != nil {
		return err
	}
	return ro.progress(ctx, parents) // the next wave's parents, at once
}

// note records msg as the target's message, unless it says so already.
func (ro *Rollout) note(ctx context.Context, msg string) error {
	if ro.target.Message == msg {
		return nil
	}
	ro.target.Message = msg
	return ro.store.Record(ctx, ro.target.Revision)
}

// sendWave moves the next n parents of the fleet to the target. Those not
// healthy on their revision are recorded as failing before the move first,
// so a leader that takes over knows them too.
func (ro *Rollout) sendWave(ctx context.Context, fleet []*unstructured.Unstructured, n int, now time.Time) error {
	var wave []*unstructured.Unstructured
	var failing []string
	for _, p := range fleet {
		if len(wave) >= n {
			break
		}
		if _, sent := ro.moving[p.GetUID()]; !sent {
			wave = append(wave, p)
			m := move{since: now, failingBefore: failingBefore(p)}
			if m.failingBefore {
				failing = append(failing, parentName(p))
			}
			ro.moving[p.GetUID()] = m
		}
	}
	if recordFailingBefore(&ro.target.Revision, failing) {
		if err := ro.store.Record(ctx, ro.target.Revision); err != nil {
			for _, p := range wave {
				delete(ro.moving, p.GetUID()) // not sent: not moving
			}
			return err
		}
	}
	// Their reconciles read the view: it says they moved before they are
	// sent.
	ro.publish()
	for i, p := range wave {
		if err := ro.send(ctx, p); err != nil {
			for _, q := range wave[i:] {
				delete(ro.moving, q.GetUID()) // not sent: not moving
			}
			return err
		}
	}
	return nil
}

// failingBeforeNote is what a rollout's message adds about the parents
// that were failing before they moved.
func failingBeforeNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; %s failing before the move, not counted against the revision (engine rollout status lists them)", count(n, "object", "objects"))
}

// count is "1 object" or "3 objects".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// complete makes the target the stable revision and moves every parent.
func (ro *Rollout) complete(ctx context.Context, msg string, done ...string) error {
	ro.target.Phase, ro.target.Message = revisions.PhaseComplete, msg
	ro.endSoak()
	ro.target.Wave = len(ro.target.tpl.Rollout.Waves) - 1
	if err := ro.store.Record(ctx, ro.target.Revision, done...); err != nil {
		return err
	}
	ro.restable()
	clear(ro.moving)
	metricRollouts.WithLabelValues(contract.KindString(ro.gvk), string(revisions.PhaseComplete)).Inc()
	ro.publish()
	ro.requeueAll(ctx)
	return nil
}

// rollBack returns every parent on the target to the revision an undo
// returns to (revisions.UndoTarget), which is the stable one from then on;
// the target is not tried again.
func (ro *Rollout) rollBack(ctx context.Context, parents []unstructured.Unstructured, why string, done ...string) error {
	ro.target.Phase = revisions.PhaseRolledBack
	ro.target.Message = why
	ro.target.SoakSince = time.Time{} // the analysis results stay, for status
	if err := ro.store.Record(ctx, ro.target.Revision, done...); err != nil {
		return err
	}
	ro.restable() // the revision an undo returns to
	ro.event(corev1.EventTypeWarning, "RevisionRolledBack", "revision %d rolled back to revision %d: %s", ro.target.Number, ro.stable.Number, why)
	metricRollouts.WithLabelValues(contract.KindString(ro.gvk), string(revisions.PhaseRolledBack)).Inc()
	if ro.kind.Sharded() {
		// The shards see the phase and requeue their parents (follow).
		clear(ro.moving)
		ro.publish()
		ro.requeueAll(ctx)
		return nil
	}
	var back []*unstructured.Unstructured
	for i := range parents {
		p := &parents[i]
		_, hash := contract.ParentRevision(p)
		if _, sent := ro.moving[p.GetUID()]; sent || hash == ro.target.Hash {
			back = append(back, p)
		}
	}
	clear(ro.moving)
	ro.publish()
	for _, p := range back {
		ro.kind.Enqueue(p)
	}
	return nil
}

// event records an event on the target's ControllerRevision.
func (ro *Rollout) event(kind, reason, format string, args ...any) {
	cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: ro.target.Name, Namespace: ro.store.Namespace}}
	cr.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("ControllerRevision"))
	ro.kind.Event(cr, kind, reason, format, args...)
}

// Status describes the kind's revisions for KindStatus.
func (ro *Rollout) Status() (revision string, held string) {
	v := ro.view.Load()
	if v == nil || v.target == nil {
		return "", ""
	}
	return fmt.Sprintf("%d (%s, %s)", v.target.Number, v.target.Hash, v.target.Phase), v.held
}

// wouldDelete evaluates the target for every parent that would move and counts the live
// children that the target no longer produces. A parent the target cannot
// evaluate is left to its health gate.
func (ro *Rollout) wouldDelete(ctx context.Context, parents []unstructured.Unstructured) (*HoldError, error) {
	held := &HoldError{Templates: []string{ro.target.Path}}
	fleet := rolloutOrder(parents, ro.target.tpl.Rollout.Canary) // pinned parents do not move
	// By name, so the same hold reads the same (and names the same examples).
	slices.SortFunc(fleet, func(a, b *unstructured.Unstructured) int {
		return cmp.Or(strings.Compare(a.GetNamespace(), b.GetNamespace()), strings.Compare(a.GetName(), b.GetName()))
	})
	for _, p := range fleet {
		children, err := ro.kind.Children(ctx, p)
		if err != nil {
			return nil, err
		}
		if err := ro.hold.countDeletes(ro.target.tpl, p, children, held); err != nil {
			return nil, err
		}
	}
	return held, nil
}
