package revisions_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cuengine/engine/revisions"
)

func TestUndoTarget(t *testing.T) {
	rev := func(number int64, phase revisions.Phase) revisions.Revision {
		return revisions.Revision{Number: number, Hash: string(rune('a'+number-1)) + "-hash", Phase: phase}
	}
	const (
		complete   = revisions.PhaseComplete
		rolledBack = revisions.PhaseRolledBack
		superseded = revisions.PhaseSuperseded
		progress   = revisions.PhaseProgressing
		held       = revisions.PhaseHeld
	)
	for _, tc := range []struct {
		name   string
		revs   []revisions.Revision
		target revisions.Revision
		want   int64 // 0: none
	}{
		{"the previous complete one", []revisions.Revision{rev(1, complete), rev(2, complete), rev(3, progress)}, rev(3, progress), 2},
		{"undo of a complete target", []revisions.Revision{rev(1, complete), rev(2, complete), rev(3, complete)}, rev(3, complete), 2},
		{"the newest complete, past those that are not",
			[]revisions.Revision{rev(1, complete), rev(2, complete), rev(3, rolledBack), rev(4, superseded), rev(5, held), rev(6, progress)}, rev(6, progress), 2},
		{"the target rolled back already", []revisions.Revision{rev(1, complete), rev(2, rolledBack)}, rev(2, rolledBack), 1},
		{"in any order", []revisions.Revision{rev(3, progress), rev(1, complete), rev(2, complete)}, rev(3, progress), 2},
		{"the target is not the newest", []revisions.Revision{rev(1, complete), rev(2, progress), rev(3, complete)}, rev(2, progress), 3},
		{"the target found by its hash, renumbered", []revisions.Revision{rev(1, complete), rev(2, complete)},
			revisions.Revision{Number: 3, Hash: rev(2, complete).Hash, Phase: progress}, 1},
		// None complete: the newest other one, whatever its phase.
		{"none complete", []revisions.Revision{rev(1, superseded), rev(2, rolledBack), rev(3, progress)}, rev(3, progress), 2},
		{"none complete, one other", []revisions.Revision{rev(1, rolledBack), rev(2, progress)}, rev(2, progress), 1},
		{"the only revision", []revisions.Revision{rev(1, complete)}, rev(1, complete), 0},
		{"no revisions", nil, rev(1, progress), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := revisions.UndoTarget(tc.revs, tc.target)
			if tc.want == 0 {
				assert.False(t, ok, "%+v", got)
				return
			}
			assert.True(t, ok)
			assert.Equal(t, tc.want, got.Number)
		})
	}
}
