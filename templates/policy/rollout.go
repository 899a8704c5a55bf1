package policy

import (
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"

	"cuelang.org/go/cue"
)

// Rollout strategies.
const (
	// RolloutImmediate moves every parent to a new revision at once.
	RolloutImmediate = "Immediate"
	// RolloutProgressive moves parents in waves, each after the previous
	// one is Ready, and rolls back on failures.
	RolloutProgressive = "Progressive"
)

// Rollout is the template's top-level rollout block: how a new revision of
// the template reaches the parents of its kind.
type Rollout struct {
	Strategy string
	// Waves are cumulative shares of the parents on the new revision.
	Waves []Wave
	// ProgressDeadline: a parent not Ready this long after its update has
	// failed.
	ProgressDeadline time.Duration
	// MaxFailures are the failures tolerated before the rollout stops and
	// rolls back; MaxFailuresPercent, when set instead, is that share of
	// the objects taking part in the rollout (FailuresAllowed).
	MaxFailures        int
	MaxFailuresPercent int
	// Canary says which parents go first (canary.go).
	Canary Canary
	// Pins says which revisions parents may be pinned to (pins.go).
	Pins Pins
	// AllowDeletions: the revision may delete children the previous one
	// produces without being held for a confirmation.
	AllowDeletions bool
	// Soak is how long each wave's parents must stay healthy on the new
	// revision before the next wave starts (a wave may declare its own,
	// SoakOf); 0: the next starts once they are healthy.
	Soak time.Duration
	// Analysis are the metric checks run during each wave's soak.
	Analysis []AnalysisCheck
	// Freeze are the windows in which no wave starts (FrozenUntil).
	Freeze []FreezeWindow
}

// Wave is a count of parents (1) or a percentage of them ("10%").
type Wave struct {
	Count   int
	Percent int
	// Soak, when OwnSoak, is the wave's own soak, in place of the
	// rollout's (Rollout.SoakOf).
	Soak    time.Duration
	OwnSoak bool
}

func (w Wave) String() string {
	if w.Percent > 0 {
		return strconv.Itoa(w.Percent) + "%"
	}
	return strconv.Itoa(w.Count)
}

// Of returns how many of total parents the wave covers: at least one when
// there are any, never more than total.
func (w Wave) Of(total int) int {
	n := w.Count
	if w.Percent > 0 {
		n = int(math.Ceil(float64(total) * float64(w.Percent) / 100))
	}
	return max(min(n, total), min(1, total))
}

// DefaultRollout is the policy of a template without a rollout block.
var DefaultRollout = Rollout{Strategy: RolloutImmediate, Waves: []Wave{{Percent: 100}}, ProgressDeadline: 5 * time.Minute, Pins: DefaultPins}

// FailuresAllowed is how many of total parents (those taking part in the
// rollout) may fail their health gates before the rollout rolls back: the
// count, or the share rounded down.
func (r Rollout) FailuresAllowed(total int) int {
	if r.MaxFailuresPercent > 0 {
		return total * r.MaxFailuresPercent / 100
	}
	return r.MaxFailures
}

// MaxFailuresString is maxFailures as the template wrote it: 1, or "10%".
func (r Rollout) MaxFailuresString() string {
	if r.MaxFailuresPercent > 0 {
		return strconv.Itoa(r.MaxFailuresPercent) + "%"
	}
	return strconv.Itoa(r.MaxFailures)
}

// DefaultWaves are a Progressive rollout's waves when it lists none.
var DefaultWaves = []Wave{{Count: 1}, {Percent: 10}, {Percent: 50}, {Percent: 100}}

// rolloutFields are the fields of the rollout block, as vet lists them.
var rolloutFields = []string{"strategy", "waves", "progressDeadline", "maxFailures", "allowDeletions", "canary", "pins", "soak", "analysis", "freeze"}

// KnownFields refuses a field of a top-level block that the engine does
// not read: a misspelt or unsupported field would otherwise be dropped
// without a word (a "soak" the engine ignores promotes at once).
func KnownFields(block string, v cue.Value, known []string) error {
	it, err := v.Fields(cue.Optional(true))
	if err != nil {
		return nil // not a struct: the decoding says so
	}
	for it.Next() {
		name := it.Selector().Unquoted()
		if !slices.Contains(known, name) {
			return &FieldError{block, name, fmt.Sprintf("unknown field (the %s block has: %s)", block, strings.Join(known, ", "))}
		}
	}
	return nil
}

// DecodeRollout reads the rollout block. Errors name the field.
func DecodeRollout(v cue.Value) (Rollout, error) {
	if err := KnownFields("rollout", v, rolloutFields); err != nil {
		return Rollout{}, err
	}
	var raw struct {
		Strategy         *string `json:"strategy"`
		Waves            []any   `json:"waves"`
		ProgressDeadline *string `json:"progressDeadline"`
		MaxFailures      any     `json:"maxFailures"`
		AllowDeletions   bool    `json:"allowDeletions"`
		Canary           any     `json:"canary"`
		Pins             any     `json:"pins"`
		Soak             any     `json:"soak"`
		Analysis         any     `json:"analysis"`
		Freeze           any     `json:"freeze"`
	}
	if err := v.Decode(&raw); err != nil {
		return Rollout{}, err
	}
	r := DefaultRollout
	r.AllowDeletions = raw.AllowDeletions
	if raw.Strategy != nil {
		if *raw.Strategy != RolloutImmediate && *raw.Strategy != RolloutProgressive {
			return Rollout{}, &FieldError{"rollout", "strategy", fmt.Sprintf("must be %q or %q, not %q", RolloutImmediate, RolloutProgressive, *raw.Strategy)}
		}
		r.Strategy = *raw.Strategy
	}
	if r.Strategy == RolloutProgressive {
		r.Waves = DefaultWaves
	}
	if raw.Waves != nil {
		waves, err := decodeWaves(raw.Waves)
		if err != nil {
			return Rollout{}, err
		}
		r.Waves = waves
	}
	if raw.ProgressDeadline != nil {
		d, err := time.ParseDuration(*raw.ProgressDeadline)
		if err != nil || d <= 0 {
			return Rollout{}, &FieldError{"rollout", "progressDeadline", fmt.Sprintf("must be a positive duration such as \"2m\", not %q", *raw.ProgressDeadline)}
		}
		r.ProgressDeadline = d
	}
	if raw.MaxFailures != nil {
		if err := decodeMaxFailures(raw.MaxFailures, &r); err != nil {
			return Rollout{}, err
		}
	}
	var err error
	if r.Canary, err = decodeCanary(raw.Canary); err != nil {
		return Rollout{}, err
	}
	if r.Pins, err = decodePins(raw.Pins); err != nil {
		return Rollout{}, err
	}
	if err := decodeGates(&r, raw.Soak, raw.Analysis, raw.Freeze); err != nil { // rollout_gates.go
		return Rollout{}, err
	}
	return r, nil
}

// decodeMaxFailures reads a count (0 or more) or a share ("10%").
func decodeMaxFailures(x any, r *Rollout) error {
	bad := func(msg string, args ...any) error {
		return &FieldError{"rollout", "maxFailures", fmt.Sprintf(msg, args...)}
	}
	if s, ok := x.(string); ok {
		p, err := strconv.Atoi(strings.TrimSuffix(s, "%"))
		if !strings.HasSuffix(s, "%") || err != nil || p < 0 || p > 100 {
			return bad("a share of the objects is written \"0%%\" to \"100%%\", not %q", s)
		}
		r.MaxFailures, r.MaxFailuresPercent = 0, p
		return nil
	}
	n, ok := wholeNumber(x)
	if !ok || n < 0 {
		return bad("must be a count of 0 or more, or a share such as \"10%%\", not %v", x)
	}
	r.MaxFailures = n
	return nil
}

// decodeWaves reads counts and percentages; they must grow, and the last
// must cover every parent ("100%").
func decodeWaves(items []any) ([]Wave, error) {
	bad := func(msg string, args ...any) error { return &FieldError{"rollout", "waves", fmt.Sprintf(msg, args...)} }
	if len(items) == 0 {
		return nil, bad("must list at least one wave, ending with \"100%%\"")
	}
	var waves []Wave
	for i, item := range items {
		var w Wave
		var err error
		if m, ok := item.(map[string]any); ok {
			w, err = decodeWaveStruct(i, m) // rollout_gates.go
		} else {
			w, err = decodeWave(item)
		}
		if err != nil {
			return nil, err
		}
		if n := len(waves); n > 0 && !grows(waves[n-1], w) {
			return nil, bad("waves are cumulative and must grow: %s after %s", w, waves[n-1])
		}
		waves = append(waves, w)
	}
	if last := waves[len(waves)-1]; last.Percent != 100 {
		return nil, bad("the last wave must be \"100%%\" (every parent), not %s", last)
	}
	return waves, nil
}

// decodeWave reads a count (1) or a share ("10%") of parents.
func decodeWave(item any) (Wave, error) {
	bad := func(msg string, args ...any) error { return &FieldError{"rollout", "waves", fmt.Sprintf(msg, args...)} }
	var w Wave
	switch x := item.(type) {
	case int, int64, float64, *big.Int, *big.Float:
		n, ok := wholeNumber(x)
		if !ok || n < 1 {
			return Wave{}, bad("a count of parents must be a whole number of 1 or more, not %v", x)
		}
		w.Count = n
	case string:
		p, err := strconv.Atoi(strings.TrimSuffix(x, "%"))
		if !strings.HasSuffix(x, "%") || err != nil || p < 1 || p > 100 {
			return Wave{}, bad("a share of parents is written \"1%%\" to \"100%%\", not %q", x)
		}
		w.Percent = p
	default:
		return Wave{}, bad("each wave is a count (1), a share (\"10%%\") or {share: \"10%%\", soak: \"5m\"}, not %v", x)
	}
	return w, nil
}

// wholeNumber converts the numbers CUE decodes into an int.
func wholeNumber(x any) (int, bool) {
	switch x := x.(type) {
	case int:
		return x, true
	case int64:
		return int(x), true
	case float64:
		return int(x), x == math.Trunc(x) && math.Abs(x) < math.MaxInt32
	case *big.Int:
		return int(x.Int64()), x.IsInt64() && x.Int64() < math.MaxInt32
	case *big.Float:
		n, acc := x.Int64()
		return int(n), acc == big.Exact && n < math.MaxInt32
	}
	return 0, false
}

// grows reports whether b covers more parents than a can be sure to: a
// count after a count, or a share after a share, must be larger; a share
// after a count and a count after a share are left to the fleet's size.
func grows(a, b Wave) bool {
	switch {
	case a.Percent > 0 && b.Percent > 0:
		return b.Percent > a.Percent
	case a.Percent == 0 && b.Percent == 0:
		return b.Count > a.Count
	}
	return true
}
