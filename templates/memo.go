package templates

import (
	"crypto/sha256"
	"sync"

	"github.com/cuengine/engine/internal/jsonhash"
)

// memoBudget bounds what a template remembers, in bytes of rendered JSON
// (Result.Size) plus memoEntryCost per result. A reconcile often evaluates
// the same inputs again after a write of its own: a new parent comes back
// when its child appears, which the template does not read yet, and again
// for its own status write. In a burst those returns come after the whole
// queue ahead of them, so the memory must span a queue of parents, not a
// few: 1 MiB holds about 1,800 results of the example MyKind template
// (325 bytes rendered each), kept as their JSON (rendered).
const memoBudget = 1 << 20

// memoEntryCost is what a result costs the budget beyond its rendered
// size: its key, its map entry and its place in the order, so that results
// that render little are not remembered without bound.
const memoEntryCost = 256

// memo remembers recent evaluation results by their inputs, the oldest
// forgotten first. Evaluation is a pure function of the template and its
// inputs, so a repeat can decode the Result from what was rendered.
type memo struct {
	mu    sync.Mutex
	m     map[[sha256.Size]byte]*rendered
	order [][sha256.Size]byte // FIFO of keys, for eviction
	bytes int                 // what the remembered results cost the budget
}

// key hashes the inputs of one evaluation, and the parent fields pruned
// from it, which its Result reports; ok is false when they cannot be
// encoded (then nothing is remembered).
func memoKey(parent, observed map[string]any, pruned []string) (k [sha256.Size]byte, ok bool) {
	// The hash of their JSON (map keys sorted: stable), streamed.
	k, err := jsonhash.Sum([]any{parent, observed, prunedValue(pruned)})
	return k, err == nil
}

func (m *memo) get(k [sha256.Size]byte) *rendered {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.m[k]
}

func (m *memo) put(k [sha256.Size]byte, r *rendered) {
	cost := r.size + memoEntryCost
	if cost > memoBudget {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = make(map[[sha256.Size]byte]*rendered)
	}
	if _, ok := m.m[k]; ok {
		return
	}
	for m.bytes+cost > memoBudget {
		oldest := m.order[0]
		m.bytes -= m.m[oldest].size + memoEntryCost
		delete(m.m, oldest)
		m.order = m.order[1:]
	}
	m.m[k] = r
	m.order = append(m.order, k)
	m.bytes += cost
}

// prunedValue is the list of pruned paths as JSON decodes it, which
// jsonhash writes without reflection: the same JSON as the []string.
func prunedValue(pruned []string) any {
	if pruned == nil {
		return nil
	}
	out := make([]any, len(pruned))
	for i, p := range pruned {
		out[i] = p
	}
	return out
}
