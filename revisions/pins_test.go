package revisions

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cuengine/engine/templates/policy"
)

// TestPinRefused: the pins the engine follows, and why it refuses the
// others, word for word.
func TestPinRefused(t *testing.T) {
	complete := func(n int64) Revision { return Revision{Number: n, Phase: PhaseComplete} }
	for _, tt := range []struct {
		name   string
		pins   policy.Pins
		newest int64
		rev    Revision
		err    string
	}{
		{"complete, recent", policy.DefaultPins, 3, complete(1), ""},
		{"superseded", policy.DefaultPins, 3, Revision{Number: 2, Phase: PhaseSuperseded}, ""},
		{"the newest", policy.Pins{Newest: 1}, 3, complete(3), ""},
		{"forbidden", policy.Pins{Forbid: true}, 3, complete(3), `the template's rollout policy forbids pins (rollout: pins: "Forbid")`},
		{"too old", policy.Pins{Newest: 2}, 5, complete(3), `the template's rollout policy allows pins only to revisions 4 to 5 (rollout: pins: newest: 2)`},
		{"rolled back", policy.DefaultPins, 3, Revision{Number: 2, Phase: PhaseRolledBack, Message: "undone (engine rollout undo)"},
			`revision 2 was rolled back and is not run again (undone (engine rollout undo))`},
		{"held", policy.DefaultPins, 3, Revision{Number: 3, Phase: PhaseHeld, Message: "the new version of p.cue would delete 1 children"},
			"revision 3 is held, waiting for `engine rollout resume` to confirm it (the new version of p.cue would delete 1 children)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := PinRefused(tt.pins, tt.newest, tt.rev)
			if tt.err == "" {
				assert.NoError(t, err)
				return
			}
			assert.EqualError(t, err, tt.err)
		})
	}
}
