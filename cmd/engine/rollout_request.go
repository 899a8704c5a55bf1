package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/revisions"
)

// request is what a user asks of a kind's target revision: annotations to
// set ("true") or remove (nil), and the line that says it was done.
type request struct {
	annotations map[string]any
	done        string
}

// revisionName is how the commands name a revision: "revision 3 of MyKind.webapp.my.domain".
func revisionName(k *revisions.Stored, rev revisions.Revision) string {
	kind, _, _ := strings.Cut(k.Kind, "/")
	return fmt.Sprintf("revision %d of %s", rev.Number, kind)
}

// pauseRequest pauses the target's rollout between waves.
func pauseRequest(kr *revisions.Stored, arg string) (request, error) {
	t := kr.Target()
	name := revisionName(kr, t)
	switch {
	case t.Paused && (t.Phase == revisions.PhasePending || t.Phase == revisions.PhaseProgressing):
		return request{}, fmt.Errorf("%s is already paused; `engine rollout resume %s` continues it", name, arg)
	case t.Phase == revisions.PhasePending || t.Phase == revisions.PhaseProgressing:
		return request{
			annotations: map[string]any{contract.AnnotationRolloutPaused: "true"},
			done:        fmt.Sprintf("%s paused: no more objects move to it until `engine rollout resume %s`", name, arg),
		}, nil
	case t.Phase == revisions.PhaseHeld:
		return request{}, fmt.Errorf("nothing to pause: %s is Held, it waits for `engine rollout resume %s` to confirm its deletions", name, arg)
	}
	return request{}, fmt.Errorf("nothing to pause: %s is %s", name, t.Phase)
}

// resumeRequest continues a paused rollout, or confirms a held revision.
// It has the signature of pauseRequest and undoRequest; its messages need
// no argument.
func resumeRequest(kr *revisions.Stored, _ string) (request, error) {
	t := kr.Target()
	name := revisionName(kr, t)
	switch {
	case t.Phase == revisions.PhaseHeld && t.Approved:
		return request{}, fmt.Errorf("%s is already approved; the engine has not acted on it yet (is it running?)", name)
	case t.Phase == revisions.PhaseHeld:
		what := "the children its message names"
		if t.HeldDeletes >= 0 {
			what = count(t.HeldDeletes, "child", "children")
		}
		return request{
			// A paused revision that is confirmed is resumed too.
			annotations: map[string]any{contract.AnnotationRolloutApproved: "true", contract.AnnotationRolloutPaused: nil},
			done:        fmt.Sprintf("%s approved: its rollout deletes %s", name, what),
		}, nil
	case t.Paused && (t.Phase == revisions.PhasePending || t.Phase == revisions.PhaseProgressing):
		return request{
			annotations: map[string]any{contract.AnnotationRolloutPaused: nil},
			done:        fmt.Sprintf("%s resumed", name),
		}, nil
	case t.Phase == revisions.PhasePending || t.Phase == revisions.PhaseProgressing:
		return request{}, fmt.Errorf("nothing to resume: %s is %s and not paused", name, t.Phase)
	}
	return request{}, fmt.Errorf("nothing to resume: %s is %s", name, t.Phase)
}

// undoRequest rolls the target back to the revision the engine returns
// its objects to (revisions.UndoTarget): the previous complete one.
func undoRequest(kr *revisions.Stored, arg string) (request, error) {
	t := kr.Target()
	name := revisionName(kr, t)
	switch t.Phase {
	case revisions.PhaseProgressing, revisions.PhaseComplete:
	case revisions.PhaseRolledBack:
		return request{}, fmt.Errorf("%s is already rolled back: %s", name, t.Message)
	case revisions.PhaseHeld:
		return request{}, fmt.Errorf("nothing to undo: %s is Held and no object runs it; restore the previous template files to drop it", name)
	default:
		return request{}, fmt.Errorf("nothing to undo: %s is %s and no object runs it yet", name, t.Phase)
	}
	if t.Undo {
		return request{}, fmt.Errorf("undo of %s is already requested; the engine has not acted on it yet (is it running?)", name)
	}
	// Where the engine sends them, by its rule.
	to, ok := revisions.UndoTarget(kr.Revisions, t)
	if !ok {
		return request{}, fmt.Errorf("nothing to go back to: %s is the kind's only stored revision (`engine rollout history %s`)", name, arg)
	}
	done := fmt.Sprintf("%s undone: the engine returns its objects to revision %d", name, to.Number)
	if to.Phase != revisions.PhaseComplete {
		done += fmt.Sprintf(" (%s: no other revision is Complete)", to.Phase)
	}
	return request{annotations: map[string]any{contract.AnnotationRolloutUndo: "true"}, done: done}, nil
}

// rolloutPollInterval is how often --wait reads the revision.
var rolloutPollInterval = time.Second

// waitFor reads the target revision until its phase is want, printing a line at
// each change of its phase or wave, for at most --wait. A phase in fail
// ends the wait with an error.
func (o *rolloutOptions) waitFor(ctx context.Context, w io.Writer, s *rolloutSession, want revisions.Phase, fail ...revisions.Phase) error {
	if o.wait <= 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, o.wait)
	defer cancel()
	target := s.revs.Target()
	tick := time.NewTicker(rolloutPollInterval)
	defer tick.Stop()
	last := ""
	for {
		cr := &appsv1.ControllerRevision{}
		err := s.c.Get(ctx, client.ObjectKey{Namespace: s.revs.Namespace, Name: target.Name}, cr)
		switch {
		case apierrors.IsNotFound(err):
			return fmt.Errorf("%s was deleted", revisionName(s.revs, target))
		case err != nil && ctx.Err() == nil:
			return err
		case err == nil:
			rev := revisions.RevisionOf(cr)
			line := s.progressLine(rev)
			if line != last {
				fmt.Fprintln(w, line)
				last = line
			}
			switch {
			case rev.Phase == want:
				return nil
			case slices.Contains(fail, rev.Phase):
				return fmt.Errorf("%s ended %s, not %s: %s", revisionName(s.revs, rev), rev.Phase, want, rev.Message)
			}
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("not %s after %s: %s", want, o.wait, last)
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// progressLine is one line of --wait: "revision 3: Progressing, wave 2/3: wave 2 of 3".
func (s *rolloutSession) progressLine(rev revisions.Revision) string {
	line := fmt.Sprintf("revision %d: %s", rev.Number, revisions.DisplayPhase(rev))
	if wave, of := revisions.WaveOf(rev, s.wavesOf); of > 0 {
		line += fmt.Sprintf(", wave %d/%d", wave, of)
	}
	if rev.Message != "" {
		line += ": " + rev.Message
	}
	return line
}
