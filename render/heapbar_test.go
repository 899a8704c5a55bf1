package render

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// watched starts b.WatchHeap (reading every millisecond) in an owned
// goroutine, ended with ctx or the test; the returned channel gets what it
// returned, once.
func watched(t *testing.T, ctx context.Context, b *Budget, w HeapWatch) <-chan *HeapExceeded {
	t.Helper()
	w.Every = time.Millisecond
	ctx, cancel := context.WithCancel(ctx)
	out := make(chan *HeapExceeded, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		out <- b.WatchHeap(ctx, w)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, wait.PollUntilContextCancel(ctx, time.Millisecond, true, func(context.Context) (bool, error) {
		return cond(), nil
	}), what)
}

// TestHeapBarEndsRunaways: the memory held past the hard bar (the live
// heap far under it: it lags a collection behind) while an evaluation runs past
// the timeout, WatchHeap refuses every new evaluation, waits for the one
// admitted and not yet past the timeout (it passes it: both are reported),
// and returns, once, the evaluations past the timeout, for the engine to
// record and exit.
func TestHeapBarEndsRunaways(t *testing.T) {
	tpl := testTemplate(t, greedyGVK)
	// The hard bar below the budget's (as the flags may set them), so
	// that only it refuses here.
	b := NewBudget(BudgetLimits{MaxOverrunning: 2, MaxHeapBytes: 450 << 20, HardHeapBytes: 400 << 20})
	var held atomic.Uint64
	held.Store(100 << 20)
	b.heap = func() uint64 { return 90 << 20 }
	b.held = held.Load

	runaway := testParent(greedyGVK, "runaway", nil)
	runaway.SetGeneration(3)
	first := b.call(tpl, runaway)
	require.NoError(t, first.admit())
	endRunaway := first.overran()
	defer endRunaway()
	late := b.call(tpl, testParent(greedyGVK, "late", nil))
	require.NoError(t, late.admit(), "under the bars, evaluated")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exited := watched(t, ctx, b, HeapWatch{Grace: time.Minute})
	held.Store(401 << 20)
	waitFor(t, "admissions refused past the hard bar", func() bool {
		return b.call(tpl, testParent(greedyGVK, "healthy", map[string]any{})).admit() != nil
	})
	err := b.call(tpl, testParent(greedyGVK, "healthy", map[string]any{})).admit()
	require.EqualError(t, err, "the engine holds 401 MiB, past the 400 MiB hard bar (--max-evaluation-heap-hard), while evaluations past --evaluation-timeout run: the engine is about to restart, and no evaluation starts")
	assert.True(t, RefusedFresh(err), "retried soon by the engine that comes back")
	select {
	case x := <-exited:
		require.Failf(t, "WatchHeap returned while an evaluation admitted had not passed the timeout", "%v", x)
	default:
	}

	endLate := late.overran() // the late one passes its timeout
	defer endLate()
	x := <-exited
	require.NotNil(t, x)
	want := []Overrun{
		{GVK: greedyGVK, NamespacedName: types.NamespacedName{Namespace: testNamespace, Name: "late"}, UID: "uid-late", Generation: 1, Template: tpl.Hash},
		{GVK: greedyGVK, NamespacedName: types.NamespacedName{Namespace: testNamespace, Name: "runaway"}, UID: "uid-runaway", Generation: 3, Template: tpl.Hash},
	}
	assert.Equal(t, &HeapExceeded{Held: 401 << 20, Heap: 90 << 20, Bar: 400 << 20, Overrunning: want}, x)
	assert.Equal(t, "the engine holds 401 MiB (live heap 90 MiB at the last collection), past the 400 MiB hard bar (--max-evaluation-heap-hard), while 2 evaluations past --evaluation-timeout run (CUE cannot stop them): "+
		testNamespace+"/late (template "+tpl.Hash+"), "+testNamespace+"/runaway (template "+tpl.Hash+"); exiting so that a restart frees their memory (each is annotated engine.cuengine.dev/evaluation-overran, so the restarted engine does not evaluate it again)", x.Error())
	assert.Equal(t, "template "+tpl.Hash+", generation 3", want[1].Annotation())
}

// TestHeapBarSparesAHighHeap: past the hard bar with no evaluation past
// the timeout (the memory is high for other reasons), WatchHeap says so and
// goes on; the engine does not exit. Past it with a runaway that ends
// before the grace is over, the heap back under it, it goes on too, and
// evaluations start again.
func TestHeapBarSparesAHighHeap(t *testing.T) {
	tpl := testTemplate(t, greedyGVK)
	// The hard bar below the budget's, as the flags may set them.
	b := NewBudget(BudgetLimits{MaxOverrunning: 2, MaxHeapBytes: 450 << 20, HardHeapBytes: 400 << 20})
	var held, highs atomic.Uint64
	held.Store(500 << 20)
	b.heap = func() uint64 { return 100 << 20 }
	b.held = held.Load
	ctx, cancel := context.WithCancel(context.Background())
	exited := watched(t, ctx, b, HeapWatch{Grace: time.Minute, High: func(h, bar uint64) {
		assert.Equal(t, uint64(500<<20), h)
		assert.Equal(t, uint64(400<<20), bar)
		highs.Add(1)
	}})
	waitFor(t, "the high heap reported, again", func() bool { return highs.Load() >= 3 })
	select {
	case x := <-exited:
		require.Failf(t, "WatchHeap returned with no evaluation past the timeout", "%v", x)
	default:
	}

	// A runaway past the bar, then its evaluation ends: no exit.
	late := b.call(tpl, testParent(greedyGVK, "late", nil))
	require.NoError(t, late.admit(), "over the hard bar with nothing past the timeout: the budget's bars apply, not the hard one")
	c := b.call(tpl, testParent(greedyGVK, "runaway", nil))
	end := c.overran()
	waitFor(t, "admissions refused while halting", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.halting
	})
	end()
	held.Store(100 << 20)
	late.done(nil) // the one in flight ends: the grace is over
	waitFor(t, "evaluations admitted again", func() bool {
		return b.call(tpl, testParent(greedyGVK, "healthy", map[string]any{})).admit() == nil
	})
	cancel()
	assert.Nil(t, <-exited, "ctx ended: no exit")
}

// TestHeapBarNone: without GOMEMLIMIT nor a hard bar, WatchHeap only waits.
func TestHeapBarNone(t *testing.T) {
	b := NewBudget(BudgetLimits{})
	require.Zero(t, b.Limits().HardHeapBytes)
	b.held = func() uint64 { return 1 << 40 }
	tpl := testTemplate(t, greedyGVK)
	end := b.call(tpl, testParent(greedyGVK, "runaway", nil)).overran()
	defer end()
	ctx, cancel := context.WithCancel(context.Background())
	exited := watched(t, ctx, b, HeapWatch{Grace: time.Minute})
	cancel()
	assert.Nil(t, <-exited)
}

// TestHeldMemoryAllocatesNothing: the hard bar's reading allocates
// nothing, so that the goroutine watching it is never made to help a
// collector that is behind.
func TestHeldMemoryAllocatesNothing(t *testing.T) {
	require.Greater(t, heldMemory(), uint64(1<<20))
	assert.Zero(t, testing.AllocsPerRun(10, func() { heldMemory() }))
}
