package jsonhash

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// Append appends the JSON of v to dst so that decoding it with
// k8s.io/apimachinery/pkg/util/json (as the apiserver's objects are
// decoded into maps) gives back the same Go values: as Sum writes it,
// except that a float64 with an integral value keeps its decimal point
// ("1.0", where encoding/json writes "1", which decodes as an int64). It
// takes only what such a decoding makes (maps, lists, strings of valid
// UTF-8, int64, finite float64, booleans and nil) and is an error on
// anything else, which would not come back as it was.
func Append(dst []byte, v any) ([]byte, error) {
	e := &encoder{buf: dst, exact: true}
	if err := e.value(v); err != nil {
		return dst, err
	}
	return e.buf, nil
}

// exactValue writes what value would hand to encoding/json, for Append.
func (e *encoder) exactValue(v any) error {
	f, ok := v.(float64)
	if !ok || math.IsInf(f, 0) || math.IsNaN(f) {
		return fmt.Errorf("jsonhash: a %T does not come back from JSON as it was", v)
	}
	start := len(e.buf)
	e.buf = strconv.AppendFloat(e.buf, f, 'g', -1, 64)
	for _, c := range e.buf[start:] {
		if c == '.' || c == 'e' {
			return nil
		}
	}
	e.buf = append(e.buf, ".0"...)
	return nil
}

// exactString is an error for a string that JSON would not carry as it is.
func exactString(s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("jsonhash: a string of invalid UTF-8 does not come back from JSON as it was")
	}
	return nil
}
