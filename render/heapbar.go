package render

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cuengine/engine/contract"
)

// The hard heap bar. The budget's bars (budget.go) refuse new evaluations;
// they cannot stop one that runs, and an evaluation past the timeout may
// grow for minutes (CUE cannot be interrupted). So past a last bar,
// BudgetLimits.HardHeapBytes, on the memory the engine holds (heldMemory:
// its resident set, current, where the live heap lags a collection
// behind), while
// evaluations past the timeout run, the
// engine exits on purpose rather than be killed for its memory without a
// word: each of those objects is annotated (contract.AnnotationEvaluationOverran)
// when it passes the timeout, so the restarted engine refuses them without
// evaluating them. A heap over the bar with no evaluation past the timeout
// (many objects, large references) never ends the engine: it goes on,
// refusing evaluations over the budget's bars.

// Overrun is an evaluation past the timeout still running: the object it
// evaluates and the template it runs.
type Overrun struct {
	GVK schema.GroupVersionKind
	types.NamespacedName
	UID        types.UID
	Generation int64
	// Template is the template's hash, as AnnotationEvaluationOverran
	// records it.
	Template string
}

// Annotation is the value of the object's AnnotationEvaluationOverran for
// this evaluation.
func (o Overrun) Annotation() string {
	return contract.EvaluationOverranValue(o.Template, o.Generation)
}

// overrun is the call's Overrun.
func (c *budgetCall) overrun() *Overrun {
	return &Overrun{GVK: c.gvk, NamespacedName: c.key.NamespacedName, UID: c.uid, Generation: c.generation, Template: c.template}
}

// HeapExceeded is why the engine exits: the memory the runtime holds past
// the hard bar while evaluations past the timeout run.
type HeapExceeded struct {
	// Held is the memory the engine held, Heap the live heap at the last
	// collection, Bar the hard bar, in bytes.
	Held, Heap, Bar uint64
	// Overrunning are the evaluations past the timeout then running, one
	// per object, template and generation, by namespace and name.
	Overrunning []Overrun
}

func (x *HeapExceeded) Error() string {
	return fmt.Sprintf("the engine holds %d MiB (live heap %d MiB at the last collection), past the %d MiB hard bar (--max-evaluation-heap-hard), while %d evaluations past --evaluation-timeout run (CUE cannot stop them): %s; exiting so that a restart frees their memory (each is annotated %s, so the restarted engine does not evaluate it again)",
		x.Held>>20, x.Heap>>20, x.Bar>>20, len(x.Overrunning), strings.Join(x.Objects(), ", "), contract.AnnotationEvaluationOverran)
}

// Objects names the objects whose evaluation runs past the timeout,
// "namespace/name (template hash)".
func (x *HeapExceeded) Objects() []string {
	out := make([]string, 0, len(x.Overrunning))
	for _, o := range x.Overrunning {
		out = append(out, fmt.Sprintf("%s (template %s)", o.NamespacedName, o.Template))
	}
	return out
}

// HeapWatch says how Budget.WatchHeap watches.
type HeapWatch struct {
	// Every is how often the heap is read (each admission reads it too).
	Every time.Duration
	// Grace bounds the wait, once the bar is crossed, for the evaluations
	// admitted and not yet past the timeout: the evaluation timeout, so
	// each either ends or is past it (and annotated) before the engine
	// exits.
	Grace time.Duration
	// High, if set, is told (at most once per HighEvery) that the memory
	// held is past the bar while no evaluation runs past the timeout: the
	// engine goes on, refusing evaluations over the budget.
	High      func(held, bar uint64)
	HighEvery time.Duration
}

// WatchHeap reads the memory the engine holds every w.Every, and when an
// admission finds it past the hard bar, until ctx ends (nil) or it is past
// the bar while evaluations past the timeout run: it then stops admitting
// any evaluation, waits (at most w.Grace) for those admitted to end or
// pass the timeout, and, the memory still past the bar, returns what runs
// past the timeout, for the engine to record and exit. If the memory went
// back under the bar meanwhile (the runaways ended), evaluations start
// again and it watches on. Without a hard bar it waits for ctx.
func (b *Budget) WatchHeap(ctx context.Context, w HeapWatch) *HeapExceeded {
	bar := b.limits.HardHeapBytes
	if bar == 0 {
		<-ctx.Done()
		return nil
	}
	tick := time.NewTicker(w.Every)
	defer tick.Stop()
	var warned time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-b.poke:
		}
		held := b.held()
		if held <= bar {
			continue
		}
		if b.overrunningNow() == 0 {
			if w.High != nil && time.Since(warned) >= w.HighEvery {
				warned = time.Now()
				w.High(held, bar)
			}
			continue
		}
		if x := b.halt(ctx, w, bar); x != nil {
			return x
		}
	}
}

// halt stops admitting evaluations, waits for those in flight, and returns
// what runs past the timeout if the memory held is still past bar; else it
// admits again and returns nil.
func (b *Budget) halt(ctx context.Context, w HeapWatch, bar uint64) *HeapExceeded {
	b.mu.Lock()
	b.halting = true
	b.mu.Unlock()
	deadline := time.Now().Add(w.Grace)
	tick := time.NewTicker(min(w.Every, 100*time.Millisecond))
	defer tick.Stop()
	for b.inflightNow() > 0 && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
	held, heap := b.held(), b.heap()
	b.mu.Lock()
	defer b.mu.Unlock()
	if held <= bar || len(b.runs) == 0 {
		b.halting = false
		return nil
	}
	x := &HeapExceeded{Held: held, Heap: heap, Bar: bar}
	seen := map[Overrun]bool{}
	for _, run := range slices.Collect(maps.Keys(b.runs)) {
		if !seen[*run] {
			seen[*run] = true
			x.Overrunning = append(x.Overrunning, *run)
		}
	}
	slices.SortFunc(x.Overrunning, func(p, q Overrun) int {
		return cmp.Or(strings.Compare(p.Namespace, q.Namespace), strings.Compare(p.Name, q.Name), strings.Compare(p.Template, q.Template), cmp.Compare(p.Generation, q.Generation))
	})
	metricHeapExceeded.Inc()
	return x
}

func (b *Budget) overrunningNow() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.overrunning
}

func (b *Budget) inflightNow() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inflight
}

// pokeOver wakes WatchHeap when an admission finds the memory held past
// the hard bar while evaluations past the timeout run; b.mu is held.
func (b *Budget) pokeOver(held uint64) {
	if b.limits.HardHeapBytes == 0 || held <= b.limits.HardHeapBytes || b.overrunning == 0 {
		return
	}
	select {
	case b.poke <- struct{}{}:
	default: // WatchHeap has been woken already
	}
}

// halted refuses an evaluation while the engine stops at the hard bar.
func (b *Budget) halted(held uint64) error {
	return &Error{Reason: contract.ReasonEvaluationBudgetExceeded, Err: &freshRefusal{fmt.Errorf(
		"the engine holds %d MiB, past the %d MiB hard bar (--max-evaluation-heap-hard), while evaluations past --evaluation-timeout run: the engine is about to restart, and no evaluation starts", held>>20, b.limits.HardHeapBytes>>20)}}
}
