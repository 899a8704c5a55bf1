package templates

import (
	"errors"
	"fmt"
	"strings"

	"cuelang.org/go/cue"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// VersionWarnings returns, at the field's line in the versions block, each
// field of a served version other than the hub whose schema admits a value
// that does not convert to the hub (toHub fails, or the hub's schema
// refuses what it gives): the apiserver stores such a write as it is,
// and only the engine's admission webhook refuses it; one stored while
// the webhook was down is Stalled on its own (engine/storedfallback.go).
// A warning of engine vet.
//
// The search is by example, so a warning is never wrong: for each field,
// a few values its schema admits (its default, numbers around the usual
// bounds, strings of usual lengths, both booleans) are tried in a parent
// that is otherwise the version's defaults; the first that does not
// convert is named. A field whose every such value converts is not
// proven safe: a bound the examples miss is found at admission only.
// Lists are not searched.
func (t *Template) VersionWarnings() (out []string) {
	if !t.Converts() {
		return nil
	}
	defer recoveredWarning(t.Path, "trying the versions' conversions", &out)
	for _, ver := range t.versions.list {
		o := t.versions.others[ver.Name]
		if ver.Hub || !ver.Served || o == nil {
			continue
		}
		found := &samples{ctx: t.ctx, optional: map[string]map[string]any{}}
		base, ok := found.sampleStruct(o.spec, nil)
		if !ok {
			continue // no value of the version's schema is found: nothing to try
		}
		base = t.convertingBase(ver.Name, o.spec, found, base)
		if problem := t.convertsToHub(ver.Name, base); problem != "" {
			out = append(out, fmt.Sprintf("%s: versions.%s.spec: a %s %s with its defaults, %s, does not convert to the hub %s: %s",
				userPos(t.root, o.spec), ver.Name, ver.Name, t.GVK.Kind, jsonText(base), t.GVK.Version, problem))
			continue
		}
		for _, l := range found.leaves {
			for _, c := range found.candidates(l.v) {
				spec := found.withValue(base, nil, l.path, c)
				if !found.admits(o.spec, spec) {
					continue // the version's own schema refuses it, across fields
				}
				problem := t.convertsToHub(ver.Name, spec)
				if problem == "" {
					continue
				}
				out = append(out, fmt.Sprintf("%s: versions.%s.spec.%s: %s admits %s, which does not convert to the hub %s: %s; the engine's admission webhook refuses such a write, and an object stored so is Stalled on its own",
					userPos(t.root, l.v), ver.Name, strings.Join(l.path, "."), ver.Name, jsonText(c), t.GVK.Version, problem))
				break
			}
		}
	}
	return out
}

// samples gathers what sampleStruct meets in a version's spec: its
// scalar fields, and a sample of each optional struct, to fill one in
// when a field inside it is tried.
type samples struct {
	ctx      *cue.Context
	leaves   []leaf
	optional map[string]map[string]any // by the struct's path, dot-joined
}

// convertingBase returns base with the required fields that have no
// default moved, one at a time, to trial values that leave fewer
// problems converting to the hub: a parent of nothing but first trial
// values ("" for a name) would fail for every field tried in it.
func (t *Template) convertingBase(version string, spec cue.Value, found *samples, base map[string]any) map[string]any {
	problems := func(s map[string]any) int { return len(t.hubProblems(version, s)) }
	worst := problems(base)
	for _, l := range found.leaves {
		if worst == 0 {
			break
		}
		if _, ok := l.v.Default(); ok || !present(base, l.path) {
			continue
		}
		for _, c := range found.candidates(l.v) {
			next := found.withValue(base, nil, l.path, c)
			if !found.admits(spec, next) {
				continue
			}
			if n := problems(next); n < worst {
				base, worst = next, n
				if n == 0 {
					break
				}
			}
		}
	}
	return base
}

// present reports whether base, built by sampleStruct, holds the field
// at path (it holds the required ones only).
func present(base map[string]any, path []string) bool {
	var at any = base
	for _, p := range path {
		m, ok := at.(map[string]any)
		if !ok {
			return false
		}
		if at, ok = m[p]; !ok {
			return false
		}
	}
	return true
}

// leaf is a field of a version's spec with a scalar schema.
type leaf struct {
	path []string
	v    cue.Value
}

// convertsToHub converts a parent of version with spec to the hub and
// returns why it does not, "" when it does.
func (t *Template) convertsToHub(version string, spec map[string]any) string {
	return strings.Join(t.hubProblems(version, spec), "; ")
}

// hubProblems are the problems of converting a parent of version with
// spec to the hub, none when it converts.
func (t *Template) hubProblems(version string, spec map[string]any) []string {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": schema.GroupVersion{Group: t.GVK.Group, Version: version}.String(),
		"kind":       t.GVK.Kind,
		"metadata":   map[string]any{"name": "vet", "namespace": "default"},
		"spec":       spec,
	}}
	_, err := t.Convert(obj, t.GVK.Version)
	var ce *ConversionError
	if errors.As(err, &ce) {
		parts := make([]string, len(ce.Problems))
		for i, p := range ce.Problems {
			parts[i] = p.String()
		}
		return parts
	}
	if err != nil {
		return []string{err.Error()}
	}
	return nil
}

// sampleStruct returns a value of the struct schema v: each required
// field its sample (sampleValue), optional ones left out; it records the
// scalar fields it meets, required or not, and the samples of optional
// structs. ok is false when a required field has no sample.
func (found *samples) sampleStruct(v cue.Value, at []string) (map[string]any, bool) {
	out := map[string]any{}
	it, err := v.Fields(cue.Optional(true))
	if err != nil {
		return nil, false
	}
	for it.Next() {
		f := it.Value()
		name := it.Selector().Unquoted()
		if it.Selector().IsDefinition() || it.Selector().PkgPath() != "" {
			continue
		}
		path := append(append([]string(nil), at...), name)
		required := !it.IsOptional()
		k := f.IncompleteKind()
		switch {
		case k == cue.StructKind:
			s, ok := found.sampleStruct(f, path)
			switch {
			case required && !ok:
				return nil, false
			case required:
				out[name] = s
			case ok:
				found.optional[strings.Join(path, ".")] = s
			}
		case k&(cue.IntKind|cue.FloatKind|cue.StringKind|cue.BoolKind) != 0 && k&(cue.StructKind|cue.ListKind) == 0:
			found.leaves = append(found.leaves, leaf{path: path, v: f})
			if required {
				s, ok := found.sampleValue(f)
				if !ok {
					return nil, false
				}
				out[name] = s
			}
		default:
			if required {
				s, ok := found.sampleValue(f)
				if !ok {
					return nil, false
				}
				out[name] = s
			}
		}
	}
	return out, true
}

// sampleValue is a concrete value the schema v admits: its default, or
// else the first candidate it admits.
func (found *samples) sampleValue(v cue.Value) (any, bool) {
	if d, ok := v.Default(); ok {
		var out any
		if err := d.Decode(&out); err == nil && d.Validate(cue.Concrete(true)) == nil {
			return out, true
		}
	}
	if v.IncompleteKind() == cue.ListKind {
		if found.admits(v, []any{}) {
			return []any{}, true
		}
	}
	if c := found.candidates(v); len(c) > 0 {
		return c[0], true
	}
	return nil, false
}

// trial values of each kind: where bounds usually are.
var (
	trialInts    = []any{int64(0), int64(1), int64(-1), int64(2), int64(3), int64(5), int64(10), int64(11), int64(16), int64(20), int64(32), int64(50), int64(64), int64(99), int64(100), int64(101), int64(128), int64(255), int64(256), int64(1000), int64(1024), int64(10000), int64(65535), int64(65536), int64(1<<31 - 1), int64(-1 << 31), int64(1 << 40)}
	trialFloats  = []any{0.5, -0.5, 1.5, 99.5, 100.5, 1e9}
	trialStrings = []any{"", "a", "A", "0", "a-b", "a_b", "a.b", "a b", strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("a", 253), strings.Repeat("a", 254), strings.Repeat("a", 1024)}
	trialBools   = []any{true, false}
)

// candidates returns the trial values the scalar schema v admits.
func (found *samples) candidates(v cue.Value) []any {
	k := v.IncompleteKind()
	var trials []any
	if k&cue.IntKind != 0 {
		trials = append(trials, trialInts...)
	}
	if k&cue.FloatKind != 0 {
		trials = append(trials, trialFloats...)
	}
	if k&cue.StringKind != 0 {
		trials = append(trials, trialStrings...)
		// The literals of an enum.
		if op, alts := v.Expr(); op == cue.OrOp {
			for _, a := range alts {
				if s, err := a.String(); err == nil {
					trials = append(trials, s)
				}
			}
		}
	}
	if k&cue.BoolKind != 0 {
		trials = append(trials, trialBools...)
	}
	var out []any
	for _, c := range trials {
		if found.admits(v, c) {
			out = append(out, c)
		}
	}
	return out
}

// admits reports whether the schema v accepts the concrete value c.
func (found *samples) admits(v cue.Value, c any) bool {
	u := v.Unify(found.ctx.Encode(c))
	return u.Validate(cue.Concrete(true)) == nil
}

// withValue returns a copy of spec (at the path at) with the field at
// path set to c; an optional struct on the way that spec leaves out is
// its sample.
func (found *samples) withValue(spec map[string]any, at, path []string, c any) map[string]any {
	out := make(map[string]any, len(spec)+1)
	for k, v := range spec {
		out[k] = v
	}
	if len(path) == 1 {
		out[path[0]] = c
		return out
	}
	here := append(append([]string(nil), at...), path[0])
	inner, _ := out[path[0]].(map[string]any)
	if inner == nil {
		inner = found.optional[strings.Join(here, ".")]
	}
	out[path[0]] = found.withValue(inner, here, path[1:], c)
	return out
}
