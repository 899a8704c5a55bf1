package reconciler

import (
	"encoding/json"
)

// mergeDiff is the JSON merge patch (RFC 7386) that turns stored into
// next, built on the maps themselves: what jsonpatch.CreateMergePatch
// returns for their JSON, without encoding both and decoding them again on
// every status write. A field next no longer has is nil (null: removed), a
// changed list is replaced whole, an equal value is left out. Equality is
// that of the values' JSON (an int64 and a float64 of the same value are
// the same number), except that two integers compare exactly, where the
// JSON route compared them as float64. Both must hold only JSON values
// (jsonValue).
func mergeDiff(stored, next map[string]any) map[string]any {
	patch := map[string]any{}
	for k, nv := range next {
		sv, had := stored[k]
		sm, sIsMap := sv.(map[string]any)
		nm, nIsMap := nv.(map[string]any)
		switch {
		case !had:
			patch[k] = nv
		case sIsMap && nIsMap:
			if sub := mergeDiff(sm, nm); len(sub) > 0 {
				patch[k] = sub
			}
		case !jsonEqual(sv, nv):
			patch[k] = nv
		}
	}
	for k := range stored {
		if _, kept := next[k]; !kept {
			patch[k] = nil
		}
	}
	return patch
}

// jsonEqual reports whether two JSON values (jsonValue) are equal.
func jsonEqual(a, b any) bool {
	switch at := a.(type) {
	case nil:
		return b == nil
	case bool:
		bt, ok := b.(bool)
		return ok && at == bt
	case string:
		bt, ok := b.(string)
		return ok && at == bt
	case map[string]any:
		bt, ok := b.(map[string]any)
		if !ok || len(at) != len(bt) {
			return false
		}
		for k, av := range at {
			if bv, has := bt[k]; !has || !jsonEqual(av, bv) {
				return false
			}
		}
		return true
	case []any:
		bt, ok := b.([]any)
		if !ok || len(at) != len(bt) {
			return false
		}
		for i := range at {
			if !jsonEqual(at[i], bt[i]) {
				return false
			}
		}
		return true
	}
	an, _ := number(a)
	bn, ok := number(b)
	return ok && an.equal(bn)
}

// jsonValue reports whether v holds only what JSON decodes into (maps,
// lists, strings, booleans, nil, json.Number and float64) and the integer
// types the engine's own status fields use: what mergeDiff knows.
func jsonValue(v any) bool {
	switch vt := v.(type) {
	case nil, bool, string:
		return true
	case map[string]any:
		for _, x := range vt {
			if !jsonValue(x) {
				return false
			}
		}
		return true
	case []any:
		for _, x := range vt {
			if !jsonValue(x) {
				return false
			}
		}
		return true
	}
	_, ok := number(v)
	return ok
}

// num is a JSON number: an exact integer or a float.
type num struct {
	i       int64
	f       float64
	isFloat bool
}

func (a num) equal(b num) bool {
	switch {
	case !a.isFloat && !b.isFloat:
		return a.i == b.i
	case a.isFloat && b.isFloat:
		return a.f == b.f
	case a.isFloat:
		return a.f == float64(b.i)
	default:
		return b.f == float64(a.i)
	}
}

// number reads a number of the types jsonValue accepts.
func number(v any) (num, bool) {
	switch vt := v.(type) {
	case int64:
		return num{i: vt}, true
	case int:
		return num{i: int64(vt)}, true
	case int32:
		return num{i: int64(vt)}, true
	case float64:
		return num{f: vt, isFloat: true}, true
	case json.Number:
		if i, err := vt.Int64(); err == nil {
			return num{i: i}, true
		}
		if f, err := vt.Float64(); err == nil {
			return num{f: f, isFloat: true}, true
		}
	}
	return num{}, false
}
