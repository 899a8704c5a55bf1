package policy

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // freeze windows name time zones: the same answer on any image

	"github.com/robfig/cron/v3"
)

// The gates a Progressive rollout adds to its waves' health: a soak (how
// long a wave's parents must stay healthy before the next wave starts),
// metric analysis run during each soak, and freeze windows in which no
// wave starts.

// AnalysisCheck is one metric check of a rollout (rollout.analysis): a
// PromQL query whose value must satisfy a condition during each wave's
// soak. The query may name {{kind}}, {{revision}} and {{wave}}.
type AnalysisCheck struct {
	// Name identifies the check in status, events and messages.
	Name string
	// Query is PromQL.
	Query string
	// Condition is what the query's value must satisfy.
	Condition Condition
}

// Condition is an operator and a number: "< 0.05", ">= 0.99", "== 0".
type Condition struct {
	Op    string
	Bound float64
}

// operators, longest first so "<=" is not read as "<".
var operators = []string{"<=", ">=", "==", "!=", "<", ">"}

// ParseCondition reads "OP NUMBER".
func ParseCondition(s string) (Condition, error) {
	t := strings.TrimSpace(s)
	for _, op := range operators {
		if rest, ok := strings.CutPrefix(t, op); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil || math.IsNaN(v) {
				return Condition{}, fmt.Errorf("condition %q: %q is not a number", s, strings.TrimSpace(rest))
			}
			return Condition{Op: op, Bound: v}, nil
		}
	}
	return Condition{}, fmt.Errorf("condition %q must be an operator (<, <=, >, >=, ==, !=) and a number, as \"< 0.05\"", s)
}

// Holds reports whether v satisfies the condition; NaN never does.
func (c Condition) Holds(v float64) bool {
	if math.IsNaN(v) {
		return false
	}
	switch c.Op {
	case "<":
		return v < c.Bound
	case "<=":
		return v <= c.Bound
	case ">":
		return v > c.Bound
	case ">=":
		return v >= c.Bound
	case "==":
		return v == c.Bound
	case "!=":
		return v != c.Bound
	}
	return false
}

func (c Condition) String() string { return c.Op + " " + strconv.FormatFloat(c.Bound, 'g', -1, 64) }

// FreezeWindow is a time in which no wave of a rollout starts: a
// recurring window (a cron schedule, in a time zone, lasting Duration
// from each activation) or a fixed one (Start to End).
type FreezeWindow struct {
	// Schedule is the cron expression as written ("0 22 * * 5"), TimeZone
	// its zone ("" is UTC), Duration how long each window lasts.
	Schedule string
	TimeZone string
	Duration time.Duration
	// Start and End bound a fixed window: frozen from Start until End.
	Start, End time.Time

	schedule cron.Schedule
}

// maxActivations bounds how many activations of a cron window are looked
// at for one instant (a window of every minute lasting days).
const maxActivations = 10000

// endAt returns when the window that holds t ends, if one does.
func (w FreezeWindow) endAt(t time.Time) (time.Time, bool) {
	if w.schedule == nil {
		return w.End, !t.Before(w.Start) && t.Before(w.End)
	}
	// The activations in (t-Duration, t] each freeze until a+Duration.
	var end time.Time
	a := w.schedule.Next(t.Add(-w.Duration))
	for i := 0; i < maxActivations && !a.IsZero() && !a.After(t); i++ {
		end = a.Add(w.Duration)
		a = w.schedule.Next(a)
	}
	return end, end.After(t)
}

func (w FreezeWindow) String() string {
	if w.schedule == nil {
		return w.Start.Format(time.RFC3339) + " to " + w.End.Format(time.RFC3339)
	}
	return fmt.Sprintf("%q for %s (%s)", w.Schedule, w.Duration, cmp.Or(w.TimeZone, "UTC"))
}

// FrozenUntil reports whether now is in one of the rollout's freeze
// windows, and when the freeze ends: windows that overlap or follow one
// another without a gap are one freeze.
func (r Rollout) FrozenUntil(now time.Time) (until time.Time, frozen bool) {
	until = now
	for range maxActivations {
		extended := false
		for _, w := range r.Freeze {
			if end, ok := w.endAt(until); ok && end.After(until) {
				until, extended, frozen = end, true, true
			}
		}
		if !extended {
			break
		}
	}
	return until, frozen
}

// SoakOf is how long the parents of wave (0-based) must stay healthy on
// the new revision before the next wave starts: the wave's own soak, or
// the rollout's.
func (r Rollout) SoakOf(wave int) time.Duration {
	if wave >= 0 && wave < len(r.Waves) && r.Waves[wave].OwnSoak {
		return r.Waves[wave].Soak
	}
	return r.Soak
}

// decodeSoak reads a non-negative duration of the field named.
func decodeSoak(field string, x any) (time.Duration, error) {
	s, ok := x.(string)
	d, err := time.ParseDuration(s)
	if !ok || err != nil || d < 0 {
		return 0, &FieldError{"rollout", field, fmt.Sprintf("must be a duration such as \"30s\" or \"10m\", not %s", quoted(x))}
	}
	return d, nil
}

// quoted shows a value as the template wrote it: strings quoted.
func quoted(x any) string {
	if s, ok := x.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(x)
}

// decodeWaveStruct reads a wave written {share: 1 | "10%", soak: "1m"}
// (item i of rollout.waves).
func decodeWaveStruct(i int, m map[string]any) (Wave, error) {
	field := fmt.Sprintf("waves[%d]", i)
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if k != "share" && k != "soak" {
			return Wave{}, &FieldError{"rollout", field, fmt.Sprintf("unknown field %q (a wave has share and soak)", k)}
		}
	}
	share, ok := m["share"]
	if !ok {
		return Wave{}, &FieldError{"rollout", field, "a wave written as a struct needs its share: a count (1) or a share (\"10%\")"}
	}
	w, err := decodeWave(share)
	if err != nil {
		return Wave{}, err
	}
	if s, ok := m["soak"]; ok {
		if w.Soak, err = decodeSoak(field+".soak", s); err != nil {
			return Wave{}, err
		}
		w.OwnSoak = true
	}
	return w, nil
}

// itemError returns how an item of the rollout block at field (an
// element of a list, "analysis[0]") reports a problem: at field, or at
// one of its fields (sub).
func itemError(field string) func(sub, msg string, args ...any) error {
	return func(sub, msg string, args ...any) error {
		f := field
		if sub != "" {
			f += "." + sub
		}
		return &FieldError{"rollout", f, fmt.Sprintf(msg, args...)}
	}
}

// decodeAnalysis reads rollout.analysis: a list of {name, query,
// condition}, the names distinct.
func decodeAnalysis(x any) ([]AnalysisCheck, error) {
	items, ok := x.([]any)
	if !ok {
		return nil, &FieldError{"rollout", "analysis", fmt.Sprintf("must be a list of {name, query, condition}, not %s", quoted(x))}
	}
	var out []AnalysisCheck
	for i, item := range items {
		bad := itemError(fmt.Sprintf("analysis[%d]", i))
		m, ok := item.(map[string]any)
		if !ok {
			return nil, bad("", "must be a struct {name, query, condition}, not %s", quoted(item))
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if k != "name" && k != "query" && k != "condition" {
				return nil, bad("", "unknown field %q (a check has name, query and condition)", k)
			}
		}
		var c AnalysisCheck
		for _, f := range []struct {
			name string
			to   *string
		}{{"name", &c.Name}, {"query", &c.Query}} {
			s, ok := m[f.name].(string)
			if !ok || strings.TrimSpace(s) == "" {
				if _, present := m[f.name]; !present {
					return nil, bad("", "needs a %s", f.name)
				}
				return nil, bad(f.name, "must be a non-empty string, not %s", quoted(m[f.name]))
			}
			*f.to = s
		}
		if strings.ContainsAny(c.Name, " \t\n,") {
			return nil, bad("name", "%q: a check's name has no spaces or commas", c.Name)
		}
		if slices.ContainsFunc(out, func(o AnalysisCheck) bool { return o.Name == c.Name }) {
			return nil, bad("name", "%q names two checks", c.Name)
		}
		cs, ok := m["condition"].(string)
		if !ok {
			if _, present := m["condition"]; !present {
				return nil, bad("", "needs a condition such as \"< 0.05\"")
			}
			return nil, bad("condition", "must be a string such as \"< 0.05\", not %s", quoted(m["condition"]))
		}
		cond, err := ParseCondition(cs)
		if err != nil {
			return nil, bad("condition", "%s", err.Error())
		}
		c.Condition = cond
		out = append(out, c)
	}
	return out, nil
}

// decodeFreeze reads rollout.freeze: a list of windows, each
// {schedule, duration, timeZone} or {start, end}.
func decodeFreeze(x any) ([]FreezeWindow, error) {
	items, ok := x.([]any)
	if !ok {
		return nil, &FieldError{"rollout", "freeze", fmt.Sprintf("must be a list of windows ({schedule, duration, timeZone} or {start, end}), not %s", quoted(x))}
	}
	var out []FreezeWindow
	for i, item := range items {
		bad := itemError(fmt.Sprintf("freeze[%d]", i))
		m, ok := item.(map[string]any)
		if !ok {
			return nil, bad("", "must be a window {schedule, duration, timeZone} or {start, end}, not %s", quoted(item))
		}
		str := func(k string) (string, error) {
			v, present := m[k]
			if !present {
				return "", nil
			}
			s, ok := v.(string)
			if !ok || s == "" {
				return "", bad(k, "must be a non-empty string, not %s", quoted(v))
			}
			return s, nil
		}
		var w FreezeWindow
		_, cronWindow := m["schedule"]
		known := []string{"start", "end"}
		if cronWindow {
			known = []string{"schedule", "duration", "timeZone"}
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if !slices.Contains(known, k) {
				return nil, bad("", "unknown field %q (a window has schedule, duration and timeZone, or start and end)", k)
			}
		}
		if cronWindow {
			var err error
			if w.Schedule, err = str("schedule"); err != nil {
				return nil, err
			}
			if w.TimeZone, err = str("timeZone"); err != nil {
				return nil, err
			}
			if _, err := time.LoadLocation(cmp.Or(w.TimeZone, "UTC")); err != nil {
				return nil, bad("timeZone", "%q is not a time zone such as \"Europe/Berlin\"", w.TimeZone)
			}
			if strings.HasPrefix(w.Schedule, "CRON_TZ=") || strings.HasPrefix(w.Schedule, "TZ=") {
				return nil, bad("schedule", "%q: the time zone goes in timeZone", w.Schedule)
			}
			spec := w.Schedule
			if w.TimeZone != "" {
				spec = "CRON_TZ=" + w.TimeZone + " " + spec
			}
			if w.schedule, err = cron.ParseStandard(spec); err != nil {
				return nil, bad("schedule", "%q is not a cron schedule such as \"0 22 * * 5\" (minute hour day month weekday): %s", w.Schedule, err)
			}
			d, err := str("duration")
			if err != nil {
				return nil, err
			}
			if d == "" {
				return nil, bad("", "needs a duration such as \"60h\", how long each window lasts")
			}
			if w.Duration, err = time.ParseDuration(d); err != nil || w.Duration <= 0 {
				return nil, bad("duration", "must be a positive duration such as \"60h\", how long each window lasts, not %q", d)
			}
		} else {
			for _, f := range []struct {
				name string
				to   *time.Time
			}{{"start", &w.Start}, {"end", &w.End}} {
				s, err := str(f.name)
				if err != nil {
					return nil, err
				}
				if s == "" {
					return nil, bad("", "needs a start and an end (RFC 3339, as \"2026-12-24T00:00:00Z\"), or a schedule and a duration")
				}
				if *f.to, err = time.Parse(time.RFC3339, s); err != nil {
					return nil, bad(f.name, "%q is not a time in RFC 3339, as \"2026-12-24T00:00:00Z\"", s)
				}
			}
			if !w.End.After(w.Start) {
				return nil, bad("end", "must be after start (%s)", w.Start.Format(time.RFC3339))
			}
		}
		out = append(out, w)
	}
	return out, nil
}

// decodeGates reads soak, analysis and freeze into r, and checks they
// fit together: gates hold waves, so they need a Progressive rollout, and
// analysis runs during a soak, so every wave needs one.
func decodeGates(r *Rollout, soak, analysis, freeze any) error {
	var err error
	if soak != nil {
		if r.Soak, err = decodeSoak("soak", soak); err != nil {
			return err
		}
	}
	if analysis != nil {
		if r.Analysis, err = decodeAnalysis(analysis); err != nil {
			return err
		}
	}
	if freeze != nil {
		if r.Freeze, err = decodeFreeze(freeze); err != nil {
			return err
		}
	}
	if r.Strategy != RolloutProgressive {
		for _, f := range []struct {
			name string
			set  bool
		}{{"soak", soak != nil}, {"analysis", analysis != nil}, {"freeze", freeze != nil}} {
			if f.set {
				return &FieldError{"rollout", f.name, fmt.Sprintf("holds waves, and strategy %s has none: use strategy: %q", r.Strategy, RolloutProgressive)}
			}
		}
		for i, w := range r.Waves {
			if w.OwnSoak {
				return &FieldError{"rollout", fmt.Sprintf("waves[%d].soak", i), fmt.Sprintf("holds waves, and strategy %s has none: use strategy: %q", r.Strategy, RolloutProgressive)}
			}
		}
	}
	if len(r.Analysis) > 0 {
		for i := range r.Waves {
			if r.SoakOf(i) == 0 {
				return &FieldError{"rollout", "analysis", fmt.Sprintf("runs during each wave's soak, and wave %d (%s) has none: declare rollout.soak, or a soak for that wave", i+1, r.Waves[i])}
			}
		}
	}
	return nil
}
