package reconciler

import "github.com/cuengine/engine/internal/jsoncmp"

// mergeDiff is the JSON merge patch (RFC 7386) that turns stored into
// next, built on the maps themselves: what jsonpatch.CreateMergePatch
// returns for their JSON, without encoding both and decoding them again on
// every status write. A field next no longer has is nil (null: removed), a
// changed list is replaced whole, an equal value is left out. Equality is
// that of the values' JSON (an int64 and a float64 of the same value are
// the same number), except that two integers compare exactly
// (jsoncmp.Equal), where the JSON route compared them as float64. Both
// must hold only JSON values (jsonValue).
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
		case !jsoncmp.Equal(sv, nv):
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
	return jsoncmp.IsNumber(v)
}
