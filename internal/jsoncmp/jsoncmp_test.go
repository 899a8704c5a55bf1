package jsoncmp

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

const big = int64(1) << 60 // beyond float64's precision: big+1 rounds to it

// TestEqual: equality of values, both ways round.
func TestEqual(t *testing.T) {
	for _, tc := range []struct {
		name  string
		a, b  any
		equal bool
	}{
		{"int64 and float64", int64(1), float64(1), true},
		{"int and int64", 1, int64(1), true},
		{"int32 and float64", int32(2), float64(2), true},
		{"json.Number integer and int64", json.Number("1"), int64(1), true},
		{"json.Number with a point and int64", json.Number("1.0"), int64(1), true},
		{"json.Number float and float64", json.Number("2.5"), 2.5, true},
		{"two json.Numbers of one value", json.Number("1"), json.Number("1.0"), true},
		{"json.Number beyond float64 and itself", json.Number("1e400"), json.Number("1e400"), true},
		{"json.Number beyond float64 and another", json.Number("1e400"), json.Number("1E400"), false},
		{"floats", 0.5, 0.5, true},
		{"different floats", 0.5, 0.25, false},
		{"zero and negative zero", int64(0), math.Copysign(0, -1), true},
		{"NaN", math.NaN(), math.NaN(), false},
		{"integers beyond float64, different", big, big + 1, false},
		{"integers beyond float64, as json.Numbers", json.Number("1152921504606846976"), big + 1, false},
		{"an integer and a float beyond float64", big + 1, float64(big), true},
		{"number and string", int64(1), "1", false},
		{"number and bool", int64(1), true, false},
		{"json.Number and string", json.Number("1"), "1", false},
		{"strings", "500m", "500m", true},
		{"different strings", "500m", "0.5", false},
		{"bools", true, true, true},
		{"different bools", true, false, false},
		{"nil and nil", nil, nil, true},
		{"nil and empty map", nil, map[string]any{}, false},
		{"nil and nil map", nil, map[string]any(nil), false},
		{"nil map and empty map", map[string]any(nil), map[string]any{}, true},
		{"nil and empty list", nil, []any{}, false},
		{"nil list and empty list", []any(nil), []any{}, true},
		{"nil and false", nil, false, false},
		{"nil and zero", nil, int64(0), false},
		{"nil and empty string", nil, "", false},
		{"a field nil and missing", map[string]any{"a": nil}, map[string]any{}, false},
		{"a field nil and nil", map[string]any{"a": nil}, map[string]any{"a": nil}, true},
		{"maps, numbers inside", map[string]any{"a": int64(1)}, map[string]any{"a": float64(1)}, true},
		{"a map with one more field", map[string]any{"a": int64(1)}, map[string]any{"a": int64(1), "b": "x"}, false},
		{"maps with other keys", map[string]any{"a": "x"}, map[string]any{"b": "x"}, false},
		{"nested maps and lists", map[string]any{"spec": map[string]any{"ports": []any{map[string]any{"port": int64(80)}}}},
			map[string]any{"spec": map[string]any{"ports": []any{map[string]any{"port": float64(80)}}}}, true},
		{"nested drift", map[string]any{"spec": map[string]any{"ports": []any{map[string]any{"port": int64(80)}}}},
			map[string]any{"spec": map[string]any{"ports": []any{map[string]any{"port": int64(81)}}}}, false},
		{"a list item with one more field", []any{map[string]any{"a": "x"}}, []any{map[string]any{"a": "x", "b": "y"}}, false},
		{"lists in another order", []any{"a", "b"}, []any{"b", "a"}, false},
		{"lists of another length", []any{"a"}, []any{"a", "a"}, false},
		{"list and map", []any{}, map[string]any{}, false},
		{"map and scalar", map[string]any{"a": "x"}, "x", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.equal, Equal(tc.a, tc.b))
			assert.Equal(t, tc.equal, Equal(tc.b, tc.a), "the other way round")
		})
	}
}

// TestContains: have holds want when every field of want is there with
// the same value; have may carry more fields, in maps at any depth, lists
// items among them, but not more list items.
func TestContains(t *testing.T) {
	for _, tc := range []struct {
		name       string
		have, want any
		equal      bool
	}{
		{"equal", map[string]any{"a": "x"}, map[string]any{"a": "x"}, true},
		{"more on have", map[string]any{"a": "x", "status": map[string]any{"b": true}}, map[string]any{"a": "x"}, true},
		{"more on want", map[string]any{"a": "x"}, map[string]any{"a": "x", "b": "y"}, false},
		{"a field missing", map[string]any{"b": "x"}, map[string]any{"a": "x"}, false},
		{"a field drifted", map[string]any{"a": "y"}, map[string]any{"a": "x"}, false},
		{"nested drift", map[string]any{"spec": map[string]any{"replicas": int64(5)}}, map[string]any{"spec": map[string]any{"replicas": int64(1)}}, false},
		{"nested, more on have", map[string]any{"spec": map[string]any{"replicas": int64(1), "paused": false}}, map[string]any{"spec": map[string]any{"replicas": int64(1)}}, true},
		{"int64 in float64", map[string]any{"n": float64(1)}, map[string]any{"n": int64(1)}, true},
		{"float64 in int64", map[string]any{"n": int64(1)}, map[string]any{"n": float64(1)}, true},
		{"int in int64", map[string]any{"n": int64(2)}, map[string]any{"n": 2}, true},
		{"int32 in int64", int64(2), int32(2), true},
		{"json.Number in float64", 2.5, json.Number("2.5"), true},
		{"integers beyond float64, different", big + 1, big, false},
		{"number in string", map[string]any{"n": "1"}, map[string]any{"n": int64(1)}, false},
		{"lists item by item", []any{map[string]any{"a": "x", "b": "y"}}, []any{map[string]any{"a": "x"}}, true},
		{"a list item drifted", []any{map[string]any{"a": "y"}}, []any{map[string]any{"a": "x"}}, false},
		{"lists of another length", []any{"a", "b"}, []any{"a"}, false},
		{"lists in another order", []any{"a", "b"}, []any{"b", "a"}, false},
		{"list in map", map[string]any{"a": "x"}, []any{"a"}, false},
		{"map in scalar", "x", map[string]any{"a": "x"}, false},
		{"bool", true, true, true},
		{"nil", nil, nil, true},
		{"a nil field in a nil field", map[string]any{"a": nil}, map[string]any{"a": nil}, true},
		{"a nil field in a missing one", map[string]any{}, map[string]any{"a": nil}, false},
		{"a nil field in a set one", map[string]any{"a": "x"}, map[string]any{"a": nil}, false},
		{"empty map in nothing", nil, map[string]any{}, false},
		{"empty map in nil map", map[string]any(nil), map[string]any{}, true},
		{"empty map in a map", map[string]any{"a": "x"}, map[string]any{}, true},
		{"empty list in nothing", nil, []any{}, false},
		{"nil list in empty list", []any{}, []any(nil), true},
		{"empty list in a list", []any{"a"}, []any{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.equal, Contains(tc.have, tc.want))
		})
	}
}

func TestIsNumber(t *testing.T) {
	for _, tc := range []struct {
		v  any
		ok bool
	}{
		{int64(1), true},
		{1, true},
		{int32(1), true},
		{2.5, true},
		{json.Number("1"), true},
		{json.Number("2.5"), true},
		{json.Number("1e400"), false},
		{json.Number("x"), false},
		{"1", false},
		{uint64(1), false},
		{float32(1), false},
		{true, false},
		{nil, false},
	} {
		assert.Equal(t, tc.ok, IsNumber(tc.v), "%#v", tc.v)
	}
}
