package jsonhash

import (
	"crypto/sha256"
	"encoding/json"
	"hash"
	"slices"
	"strconv"
	"sync"
)

// Sum is sha256.Sum256 of json.Marshal(v), and its error.
func Sum(v any) (sum [sha256.Size]byte, err error) {
	e := pool.Get().(*encoder)
	defer e.release()
	e.h.Reset()
	e.buf, e.keys = e.buf[:0], e.keys[:0]
	if err = e.value(v); err != nil {
		return sum, err
	}
	e.flush()
	e.h.Sum(sum[:0])
	return sum, nil
}

// flushAt is the buffered size past which the encoder writes into the hash.
const flushAt = 1024

type encoder struct {
	h     hash.Hash // nil for Append: the bytes are kept, not hashed
	buf   []byte
	keys  []string // scratch for sorting, reused by nested maps in turn
	exact bool     // Append's: values decode back to what they were (append.go)
}

var pool = sync.Pool{New: func() any {
	return &encoder{h: sha256.New(), buf: make([]byte, 0, 2*flushAt)}
}}

// release returns e to the pool, without a buffer a large value grew.
func (e *encoder) release() {
	if cap(e.buf) > 16*flushAt {
		e.buf = make([]byte, 0, 2*flushAt)
	}
	clear(e.keys)
	pool.Put(e)
}

func (e *encoder) flush() {
	e.h.Write(e.buf)
	e.buf = e.buf[:0]
}

func (e *encoder) value(v any) error {
	if e.h != nil && len(e.buf) >= flushAt {
		e.flush()
	}
	switch vt := v.(type) {
	case nil:
		e.buf = append(e.buf, "null"...)
	case bool:
		e.buf = strconv.AppendBool(e.buf, vt)
	case string:
		return e.string(vt)
	case int64:
		e.buf = strconv.AppendInt(e.buf, vt, 10)
	case int:
		if e.exact {
			return e.exactValue(v)
		}
		e.buf = strconv.AppendInt(e.buf, int64(vt), 10)
	case int32:
		if e.exact {
			return e.exactValue(v)
		}
		e.buf = strconv.AppendInt(e.buf, int64(vt), 10)
	case map[string]any:
		if vt == nil && e.exact {
			return e.exactValue(v)
		}
		if vt == nil {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		start := len(e.keys)
		for k := range vt {
			e.keys = append(e.keys, k)
		}
		keys := e.keys[start:]
		slices.Sort(keys)
		e.buf = append(e.buf, '{')
		for i, k := range keys {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			if err := e.string(k); err != nil {
				return err
			}
			e.buf = append(e.buf, ':')
			if err := e.value(vt[k]); err != nil {
				return err
			}
		}
		e.buf = append(e.buf, '}')
		clear(e.keys[start:])
		e.keys = e.keys[:start]
	case []any:
		if vt == nil && e.exact {
			return e.exactValue(v)
		}
		if vt == nil {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		e.buf = append(e.buf, '[')
		for i, x := range vt {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			if err := e.value(x); err != nil {
				return err
			}
		}
		e.buf = append(e.buf, ']')
	default: // floats, typed values: as encoding/json writes them
		if e.exact {
			return e.exactValue(v)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		e.buf = append(e.buf, b...)
	}
	return nil
}

// string writes s quoted, as encoding/json does: a string of printable
// ASCII without the characters it escapes is written as it is, any other
// through encoding/json.
func (e *encoder) string(s string) error {
	if e.exact {
		if err := exactString(s); err != nil {
			return err
		}
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, err := json.Marshal(s)
			if err != nil {
				return err
			}
			e.buf = append(e.buf, b...)
			return nil
		}
	}
	e.buf = append(e.buf, '"')
	e.buf = append(e.buf, s...)
	e.buf = append(e.buf, '"')
	return nil
}
