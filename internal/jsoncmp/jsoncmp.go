package jsoncmp

import "encoding/json"

// Equal reports whether a and b are the same value: maps of the same keys
// with equal values (a nil map is an empty one), lists of the same length
// with equal items in the same order, numbers of any type by value (two
// integers as integers, so that 1<<60 and 1<<60 + 1 differ; an integer
// and a float as float64s), and anything else by Go's ==, so that nil is only nil. A value of a
// type that is not comparable, other than a map or a list, panics as ==
// does.
func Equal(a, b any) bool {
	return compare(a, b, false)
}

// Contains reports whether have holds want: every field of a map of want
// is in have (even one whose value is nil) and holds that field's value,
// where have may carry more fields; a list of want is a list of the same
// length in have whose items hold want's, in order; anything else is as
// Equal compares it.
func Contains(have, want any) bool {
	return compare(have, want, true)
}

// compare is Contains when subset, and otherwise Equal.
func compare(have, want any, subset bool) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok || !subset && len(h) != len(w) {
			return false
		}
		for k, wv := range w {
			if hv, ok := h[k]; !ok || !compare(hv, wv, subset) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !compare(h[i], w[i], subset) {
				return false
			}
		}
		return true
	}
	wn, ok := number(want)
	if !ok {
		return have == want
	}
	hn, ok := number(have)
	return ok && hn.equal(wn)
}

// IsNumber reports whether v is a number Equal and Contains compare by
// value: an int, int32, int64, float64, or a json.Number that float64 can
// hold.
func IsNumber(v any) bool {
	_, ok := number(v)
	return ok
}

// num is a number: an exact integer or a float.
type num struct {
	i       int64
	f       float64
	isFloat bool
}

// number reads v as a num, if it is one of the types IsNumber names. A
// json.Number is an integer when it is one that int64 holds.
func number(v any) (num, bool) {
	switch vt := v.(type) {
	case int64:
		return num{i: vt}, true
	case float64:
		return num{f: vt, isFloat: true}, true
	case int:
		return num{i: int64(vt)}, true
	case int32:
		return num{i: int64(vt)}, true
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

func (a num) equal(b num) bool {
	if a.isFloat || b.isFloat {
		return a.float() == b.float()
	}
	return a.i == b.i
}

func (a num) float() float64 {
	if a.isFloat {
		return a.f
	}
	return float64(a.i)
}
