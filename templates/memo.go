package templates

import (
	"crypto/sha256"
	"encoding/json"
	"sync"
)

// memoSize bounds how many recent evaluations a template remembers. A
// reconcile usually evaluates again right after a write of its own (the
// child's watch event brings it back with the same inputs), so a short
// memory catches most repeats while holding little.
const memoSize = 256

// memo remembers recent evaluation results by their inputs. Evaluation is a
// pure function of the template and its inputs, so a repeat can return the
// same Result (which callers never modify).
type memo struct {
	mu    sync.Mutex
	m     map[[sha256.Size]byte]*Result
	order [][sha256.Size]byte // FIFO of keys, for eviction
}

// key hashes the inputs of one evaluation, and the parent fields pruned
// from it, which its Result reports; ok is false when they cannot be
// encoded (then nothing is remembered).
func memoKey(parent, observed map[string]any, pruned []string) (k [sha256.Size]byte, ok bool) {
	b, err := json.Marshal([3]any{parent, observed, pruned}) // map keys are sorted: stable
	if err != nil {
		return k, false
	}
	return sha256.Sum256(b), true
}

func (m *memo) get(k [sha256.Size]byte) *Result {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.m[k]
}

func (m *memo) put(k [sha256.Size]byte, r *Result) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = make(map[[sha256.Size]byte]*Result, memoSize)
	}
	if _, ok := m.m[k]; ok {
		return
	}
	if len(m.order) == memoSize {
		delete(m.m, m.order[0])
		m.order = m.order[1:]
	}
	m.m[k] = r
	m.order = append(m.order, k)
}
