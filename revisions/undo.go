package revisions

// UndoTarget is the one rule for the revision a rollback returns to, when
// `engine rollout undo` asks for it or when a rollout fails its health
// gates: of revs, the newest (by number) Complete revision other than
// target; when none is Complete (revisions recorded before rollouts were),
// the newest other revision, whatever its phase. ok is false when revs
// holds no revision but target: its parents stay on it.
//
// The rollout coordinator moves the parents of a rolled-back target there;
// `engine rollout undo` names it before it asks.
func UndoTarget(revs []Revision, target Revision) (to Revision, ok bool) {
	var complete, other *Revision
	for i := range revs {
		r := &revs[i]
		if r.Hash == target.Hash {
			continue
		}
		if other == nil || r.Number > other.Number {
			other = r
		}
		if r.Phase == PhaseComplete && (complete == nil || r.Number > complete.Number) {
			complete = r
		}
	}
	switch {
	case complete != nil:
		return *complete, true
	case other != nil:
		return *other, true
	}
	return Revision{}, false
}
