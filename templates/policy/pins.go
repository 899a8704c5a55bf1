package policy

import (
	"fmt"
	"maps"
	"slices"
)

// Pin policies.
const (
	// PinsAllow allows pins to the newest DefaultPinnedRevisions revisions.
	PinsAllow = "Allow"
	// PinsForbid refuses every pin.
	PinsForbid = "Forbid"
)

// DefaultPinnedRevisions is how many of the newest revisions a parent may
// be pinned to when the template says no other number.
const DefaultPinnedRevisions = 10

// maxPinnedRevisions bounds rollout.pins.newest: each revision a pin may
// select is one more ControllerRevision the engine keeps.
const maxPinnedRevisions = 100

// Pins is the rollout block's pins field: whether a parent may be pinned
// (contract.AnnotationTemplateRevision) to a revision other than the one
// the rollout puts it on, and to which. A pin selects the template's
// content only; the newest template's policy still bounds the children.
type Pins struct {
	// Forbid refuses every pin.
	Forbid bool
	// Newest is how many of the newest revisions (by number, the newest
	// included) a pin may select; 0 is DefaultPinnedRevisions.
	Newest int
}

// newest is Newest, defaulted.
func (p Pins) newest() int {
	if p.Newest == 0 {
		return DefaultPinnedRevisions
	}
	return p.Newest
}

// Oldest is the oldest revision number a pin may select while the newest
// revision is newest (at least 1); 0 when pins are forbidden.
func (p Pins) Oldest(newest int64) int64 {
	if p.Forbid {
		return 0
	}
	return max(1, newest-int64(p.newest())+1)
}

// DefaultPins are the pins of a template that says nothing about them.
var DefaultPins = Pins{Newest: DefaultPinnedRevisions}

// Allows reports whether a pin to revision number may be followed while
// the newest revision is newest.
func (p Pins) Allows(number, newest int64) bool {
	return !p.Forbid && number > newest-int64(p.newest())
}

// String is the policy as a template writes it.
func (p Pins) String() string {
	if p.Forbid {
		return fmt.Sprintf("pins: %q", PinsForbid)
	}
	return fmt.Sprintf("pins: newest: %d", p.newest())
}

// decodePins reads rollout.pins: "Allow", "Forbid", or {newest: K}.
func decodePins(x any) (Pins, error) {
	bad := func(msg string, args ...any) error { return &FieldError{"rollout", "pins", fmt.Sprintf(msg, args...)} }
	switch x := x.(type) {
	case nil:
		return DefaultPins, nil
	case string:
		switch x {
		case PinsAllow:
			return DefaultPins, nil
		case PinsForbid:
			return Pins{Forbid: true}, nil
		}
		return Pins{}, bad("must be %q, %q or {newest: N}, not %q", PinsAllow, PinsForbid, x)
	case map[string]any:
		p := DefaultPins
		for _, field := range slices.Sorted(maps.Keys(x)) {
			v := x[field]
			if field != "newest" {
				return Pins{}, bad("unknown field %q (newest)", field)
			}
			n, ok := wholeNumber(v)
			if !ok || n < 1 || n > maxPinnedRevisions {
				return Pins{}, bad("newest must be a whole number from 1 to %d, not %v", maxPinnedRevisions, v)
			}
			p.Newest = n
		}
		return p, nil
	}
	return Pins{}, bad("must be %q, %q or {newest: N}, not %v", PinsAllow, PinsForbid, x)
}
