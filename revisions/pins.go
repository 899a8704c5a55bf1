package revisions

import (
	"fmt"

	"github.com/cuengine/engine/templates/policy"
)

// PinError is a pin (contract.AnnotationTemplateRevision) the engine does
// not follow: not a revision number, a revision that is not stored, or one
// PinRefused refuses. Nothing renders the parent until the pin or the
// template changes: the reconciler makes it terminal, with the reason
// contract.ReasonRevisionNotFound and Err's message.
type PinError struct {
	Err error
}

func (e *PinError) Error() string { return e.Err.Error() }
func (e *PinError) Unwrap() error { return e.Err }

// PinRefused is the one rule for a pin (contract.AnnotationTemplateRevision)
// the engine does not follow: pins says which revisions the newest
// template's rollout policy lets a parent be pinned to (by number, against
// newest, the newest revision's number), and no pin selects a revision the
// platform rejected (RolledBack) or has not confirmed (Held). It returns
// why, or nil when the pin is followed. The reconcile refuses such a pin
// (ReasonRevisionNotFound), the store's prune does not keep a revision
// alive for it, and `engine rollout history` shows it.
func PinRefused(pins policy.Pins, newest int64, rev Revision) error {
	switch {
	case pins.Forbid:
		return fmt.Errorf("the template's rollout policy forbids pins (rollout: %s)", pins)
	case !pins.Allows(rev.Number, newest):
		return fmt.Errorf("the template's rollout policy allows pins only to revisions %d to %d (rollout: %s)", pins.Oldest(newest), newest, pins)
	case rev.Phase == PhaseRolledBack:
		return fmt.Errorf("revision %d was rolled back and is not run again (%s)", rev.Number, rev.Message)
	case rev.Phase == PhaseHeld:
		return fmt.Errorf("revision %d is held, waiting for `engine rollout resume` to confirm it (%s)", rev.Number, rev.Message)
	}
	return nil
}
