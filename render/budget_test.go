package render

import (
	"context"
	"fmt"
	"runtime/debug"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates"
)

// overrunOnce renders the parent with a timeout far below what its
// evaluation takes (quad 40: tens of milliseconds, hundreds under -race),
// so that it overruns, and waits (bounded) for the evaluation to end in
// the background: the object is then a suspect with nothing running.
func overrunOnce(t *testing.T, b *Budget, tpl *templates.Template, parent *unstructured.Unstructured) {
	t.Helper()
	_, err := Render(tpl, parent, nil, Options{Limits: Limits{EvaluationTimeout: time.Millisecond}, Budget: b})
	var re *Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, contract.ReasonEvaluationTimeout, re.Reason)
	waitOverrunning(t, b, 0)
}

func waitOverrunning(t *testing.T, b *Budget, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		return b.Stats().Overrunning == n, nil
	}), "the background evaluations end")
}

// TestBudgetRemembersOverLimit: inputs that went over a limit are refused
// at once with the same error, on any path that shares the budget, until
// the object's generation (or, without a UID, its content) changes; another
// object of the same name is evaluated.
func TestBudgetRemembersOverLimit(t *testing.T) {
	tpl := testTemplate(t, greedyGVK)
	opts := Options{Limits: Limits{MaxChildren: 3}, Budget: NewBudget(BudgetLimits{})}
	msg := "the template renders 4 children and resources for this object, more than the 3 allowed (--max-children); nothing was applied"
	p := testParent(greedyGVK, "big", map[string]any{"count": int64(4)})

	_, err := Render(tpl, p, nil, opts)
	require.EqualError(t, err, msg)
	assert.False(t, Unevaluated(err), "this one was evaluated")
	require.EqualError(t, opts.Budget.Remembered(tpl, p), msg)
	assert.Equal(t, BudgetStats{Evaluated: 1}, opts.Budget.Stats())

	_, err = Render(tpl, p, nil, opts)
	require.EqualError(t, err, msg, "the same error")
	var re *Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, contract.ReasonTooManyChildren, re.Reason)
	assert.True(t, Unevaluated(err))
	assert.Equal(t, BudgetStats{Evaluated: 1, Remembered: 1}, opts.Budget.Stats(), "not evaluated again")

	p.Object["spec"] = map[string]any{"count": int64(2)}
	p.SetGeneration(2)
	_, err = Render(tpl, p, nil, opts)
	require.NoError(t, err, "a new generation is evaluated")
	assert.NoError(t, opts.Budget.Remembered(tpl, p))
	assert.Equal(t, BudgetStats{Evaluated: 2, Remembered: 1}, opts.Budget.Stats())

	again := testParent(greedyGVK, "big", map[string]any{"count": int64(4)})
	_, err = Render(tpl, again, nil, opts)
	require.EqualError(t, err, msg)
	again.SetUID("another")
	_, err = Render(tpl, again, nil, opts)
	require.EqualError(t, err, msg)
	assert.Equal(t, BudgetStats{Evaluated: 4, Remembered: 1}, opts.Budget.Stats(), "another object of the same name is evaluated")

	file := testParent(greedyGVK, "file", map[string]any{"count": int64(4)})
	file.SetUID("")
	file.SetGeneration(0)
	_, err = Render(tpl, file, nil, opts)
	require.EqualError(t, err, msg)
	_, err = Render(tpl, file.DeepCopy(), nil, opts)
	require.EqualError(t, err, msg)
	assert.Equal(t, int64(5), opts.Budget.Stats().Evaluated, "the same content from a file is not evaluated again")
	file.Object["spec"] = map[string]any{"count": int64(1)}
	_, err = Render(tpl, file, nil, opts)
	require.NoError(t, err, "another content is")

	opts.Budget.Forget(contract.KindString(greedyGVK), types.NamespacedName{Namespace: testNamespace, Name: "big"})
	assert.NoError(t, opts.Budget.Remembered(tpl, again), "forgotten on deletion")

	var nilBudget *Budget
	_, err = Render(tpl, testParent(greedyGVK, "big", map[string]any{"count": int64(4)}), nil, Options{Limits: opts.Limits, Budget: nilBudget})
	require.EqualError(t, err, msg, "a nil budget remembers nothing and refuses nothing")
}

// TestBudgetRefusesSuspects: an object whose evaluation overran is
// refused, whatever its inputs, while the evaluations past the timeout
// engine-wide are at the cap or the heap is over its bound; an object
// never seen to overrun is evaluated; one that evaluates within the limits
// again is no suspect any more.
func TestBudgetRefusesSuspects(t *testing.T) {
	tpl := testTemplate(t, greedyGVK)
	b := NewBudget(BudgetLimits{MaxOverrunning: 2})
	suspect := testParent(greedyGVK, "suspect", map[string]any{"quad": int64(40)})
	overrunOnce(t, b, tpl, suspect)
	assert.Equal(t, 1, b.Stats().Suspects)
	evaluated := b.Stats().Evaluated

	_, err := Render(tpl, suspect, nil, Options{Limits: Limits{EvaluationTimeout: time.Millisecond}, Budget: b})
	assert.True(t, Unevaluated(err), "the same inputs: remembered")
	assert.Equal(t, evaluated, b.Stats().Evaluated)

	// Two evaluations of other objects past the timeout, still running.
	ended1 := b.call(tpl, testParent(greedyGVK, "runaway-1", nil)).overran()
	ended2 := b.call(tpl, testParent(greedyGVK, "runaway-2", nil)).overran()
	suspect.Object["spec"] = map[string]any{"quad": int64(2)}
	suspect.SetGeneration(2)
	_, err = Render(tpl, suspect, nil, Options{Budget: b})
	require.EqualError(t, err, "2 evaluations that ran past --evaluation-timeout are still running (--max-overrunning-evaluations allows 2), and this object's evaluation ran past it before; it is evaluated again once fewer run")
	var re *Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, contract.ReasonEvaluationBudgetExceeded, re.Reason)
	assert.True(t, Unevaluated(err))
	assert.Equal(t, evaluated, b.Stats().Evaluated, "refused without evaluating")
	assert.Equal(t, int64(1), b.Stats().Refused)
	assert.NoError(t, b.Remembered(tpl, suspect), "a refusal over the budget is not remembered: it is retried")

	other := testParent(greedyGVK, "innocent", map[string]any{})
	_, err = Render(tpl, other, nil, Options{Budget: b})
	require.NoError(t, err, "an object never seen to overrun is evaluated")

	ended1()
	assert.Equal(t, 1, b.Stats().Overrunning)
	_, err = Render(tpl, suspect, nil, Options{Budget: b})
	require.NoError(t, err, "under the cap again, the suspect is evaluated")
	assert.Equal(t, 2, b.Stats().Suspects, "and, within the limits, is no suspect any more: runaway-1 and -2 are")
	ended2()

	// The heap bound.
	heavy := testParent(greedyGVK, "heavy", map[string]any{"quad": int64(41)})
	b = NewBudget(BudgetLimits{MaxHeapBytes: 512 << 20})
	b.heap = func() uint64 { return 900 << 20 }
	b.heap = func() uint64 { return 550 << 20 }
	_, err = Render(tpl, other, nil, Options{Budget: b})
	require.NoError(t, err, "over the heap bound (but not a sixth over it), an object never seen to overrun is evaluated")
	overrunOnce(t, b, tpl, heavy)
	b.heap = func() uint64 { return 900 << 20 }
	heavy.SetGeneration(2)
	_, err = Render(tpl, heavy, nil, Options{Budget: b})
	require.EqualError(t, err, "the engine's live heap is 900 MiB, over the 512 MiB evaluations may reach (--max-evaluation-heap), and this object's evaluation ran past --evaluation-timeout before; it is evaluated again once the heap is under it")
	b.heap = func() uint64 { return 100 << 20 }
	_, err = Render(tpl, heavy, nil, Options{Limits: Limits{EvaluationTimeout: time.Minute}, Budget: b})
	require.NoError(t, err, "under the bound again")
}

// TestBudgetDefaults: the cap defaults to DefaultMaxOverrunning; the heap
// bound to three quarters of GOMEMLIMIT, the hard bar to seven eighths, or
// none without one.
func TestBudgetDefaults(t *testing.T) {
	assert.Equal(t, BudgetLimits{MaxOverrunning: DefaultMaxOverrunning}, NewBudget(BudgetLimits{}).Limits())
	assert.Equal(t, BudgetLimits{MaxOverrunning: 5, MaxHeapBytes: 7}, NewBudget(BudgetLimits{MaxOverrunning: 5, MaxHeapBytes: 7}).Limits())
	prev := debug.SetMemoryLimit(1 << 30)
	defer debug.SetMemoryLimit(prev)
	assert.Equal(t, BudgetLimits{MaxOverrunning: DefaultMaxOverrunning, MaxHeapBytes: 768 << 20, HardHeapBytes: 896 << 20}, NewBudget(BudgetLimits{}).Limits())
	assert.Equal(t, BudgetLimits{MaxOverrunning: DefaultMaxOverrunning, MaxHeapBytes: 768 << 20, HardHeapBytes: 900 << 20}, NewBudget(BudgetLimits{HardHeapBytes: 900 << 20}).Limits())
	assert.Positive(t, liveHeap(), "the live heap is read from runtime/metrics")
	assert.Greater(t, heldMemory(), uint64(1<<20), "the resident set is read from /proc/self/statm")
}

// TestBudgetCapsFreshInputs: inputs never seen to overrun are evaluated
// past the suspects' cap, up to twice it, and past the suspects' heap bar
// up to a sixth more; an object whose last evaluation ended within the
// limits up to three times the cap; beyond those nothing is evaluated, so
// objects that overran the first time they were seen cannot hold the
// engine's memory without bound.
func TestBudgetCapsFreshInputs(t *testing.T) {
	tpl := testTemplate(t, greedyGVK)
	b := NewBudget(BudgetLimits{MaxOverrunning: 2})
	suspect := testParent(greedyGVK, "cap-suspect", map[string]any{"quad": int64(100)})
	overrunOnce(t, b, tpl, suspect)
	suspect.SetGeneration(2)
	fresh := testParent(greedyGVK, "fresh", map[string]any{})
	known := testParent(greedyGVK, "known", map[string]any{})
	_, err := Render(tpl, known, nil, Options{Budget: b})
	require.NoError(t, err)

	var ended []func()
	for i := range 3 {
		ended = append(ended, b.call(tpl, testParent(greedyGVK, fmt.Sprintf("runaway-%d", i), nil)).overran())
	}
	_, err = Render(tpl, suspect, nil, Options{Budget: b})
	require.EqualError(t, err, "3 evaluations that ran past --evaluation-timeout are still running (--max-overrunning-evaluations allows 2), and this object's evaluation ran past it before; it is evaluated again once fewer run")
	_, err = Render(tpl, fresh, nil, Options{Budget: b})
	require.NoError(t, err, "an input never seen to overrun does not starve behind the suspects")

	ended = append(ended, b.call(tpl, testParent(greedyGVK, "runaway-3", nil)).overran())
	evaluated := b.Stats().Evaluated
	fresh = testParent(greedyGVK, "fresh-2", map[string]any{}) // the first evaluated within the limits: known
	_, err = Render(tpl, fresh, nil, Options{Budget: b})
	require.EqualError(t, err, "4 evaluations that ran past --evaluation-timeout are still running, the most there may be (twice --max-overrunning-evaluations, 2); no evaluation starts until fewer run")
	var re *Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, contract.ReasonEvaluationBudgetExceeded, re.Reason)
	assert.True(t, Unevaluated(err))
	assert.True(t, RefusedFresh(err))
	assert.Equal(t, evaluated, b.Stats().Evaluated, "refused without evaluating")
	assert.NoError(t, b.Remembered(tpl, fresh), "and retried later")
	_, err = Render(tpl, suspect, nil, Options{Budget: b})
	assert.False(t, RefusedFresh(err), "a suspect is not fresh")

	known.SetGeneration(2)
	_, err = Render(tpl, known, nil, Options{Budget: b})
	require.NoError(t, err, "an object that evaluated within the limits before has a bar higher still")
	ended = append(ended, b.call(tpl, testParent(greedyGVK, "runaway-4", nil)).overran(), b.call(tpl, testParent(greedyGVK, "runaway-5", nil)).overran())
	known.SetGeneration(3)
	_, err = Render(tpl, known, nil, Options{Budget: b})
	require.EqualError(t, err, "6 evaluations that ran past --evaluation-timeout are still running, the most there may be even for an object that evaluated within the limits before (three times --max-overrunning-evaluations, 2); no evaluation starts until fewer run")
	assert.True(t, RefusedFresh(err))
	ended[5]()
	ended[4]()

	ended[3]()
	_, err = Render(tpl, fresh, nil, Options{Budget: b})
	require.NoError(t, err, "under twice the cap, a fresh input is evaluated again")
	for _, end := range ended[:3] {
		end()
	}
}

// TestBudgetChecksTheHeapOfEveryEvaluation: over --max-evaluation-heap a
// suspect is refused; a sixth above it, every evaluation is.
func TestBudgetChecksTheHeapOfEveryEvaluation(t *testing.T) {
	tpl := testTemplate(t, greedyGVK)
	b := NewBudget(BudgetLimits{MaxHeapBytes: 600 << 20})
	suspect := testParent(greedyGVK, "heap-suspect", map[string]any{"quad": int64(100)})
	overrunOnce(t, b, tpl, suspect)
	suspect.SetGeneration(2)
	fresh := testParent(greedyGVK, "fresh", map[string]any{})

	b.heap = func() uint64 { return 650 << 20 }
	_, err := Render(tpl, suspect, nil, Options{Budget: b})
	require.EqualError(t, err, "the engine's live heap is 650 MiB, over the 600 MiB evaluations may reach (--max-evaluation-heap), and this object's evaluation ran past --evaluation-timeout before; it is evaluated again once the heap is under it")
	_, err = Render(tpl, fresh, nil, Options{Budget: b})
	require.NoError(t, err, "between the bars, an input never seen to overrun is evaluated")

	b.heap = func() uint64 { return 750 << 20 }
	evaluated := b.Stats().Evaluated
	_, err = Render(tpl, fresh, nil, Options{Budget: b})
	require.EqualError(t, err, "the engine's live heap is 750 MiB, over the 700 MiB past which no evaluation starts (--max-evaluation-heap and a sixth); this object is evaluated once the heap is under it")
	var re *Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, contract.ReasonEvaluationBudgetExceeded, re.Reason)
	assert.Equal(t, evaluated, b.Stats().Evaluated, "refused without evaluating")

	b.heap = func() uint64 { return 100 << 20 }
	_, err = Render(tpl, fresh, nil, Options{Budget: b})
	require.NoError(t, err)
	_, err = Render(tpl, suspect, nil, Options{Limits: Limits{EvaluationTimeout: time.Minute}, Budget: b})
	require.NoError(t, err)
}

// TestBudgetRefusesWhatOverranBefore: a parent whose annotation says its
// evaluation overran with this template and this generation is refused
// without evaluating, by a budget that never saw it (a restarted engine);
// one whose annotation names another template or generation is evaluated,
// as a suspect.
func TestBudgetRefusesWhatOverranBefore(t *testing.T) {
	tpl := testTemplate(t, greedyGVK)
	b := NewBudget(BudgetLimits{MaxOverrunning: 1})
	p := testParent(greedyGVK, "runaway", map[string]any{"quad": int64(400)})
	p.SetGeneration(3)
	p.SetAnnotations(map[string]string{contract.AnnotationEvaluationOverran: contract.EvaluationOverranValue(tpl.Hash, 3)})

	_, err := Render(tpl, p, nil, Options{Budget: b})
	require.EqualError(t, err, "this object's evaluation ran past --evaluation-timeout before, with this template and this generation of its spec (annotation engine.cuengine.dev/evaluation-overran); it is not evaluated again until its spec or the template changes: change its spec, or remove the annotation to retry")
	var re *Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, contract.ReasonEvaluationBudgetExceeded, re.Reason)
	assert.True(t, Unevaluated(err))
	assert.True(t, OverranBefore(err))
	assert.Equal(t, BudgetStats{Remembered: 1}, b.Stats(), "not evaluated")

	ended := b.call(tpl, testParent(greedyGVK, "other", nil)).overran()
	for _, stale := range []string{contract.EvaluationOverranValue("another", 3), contract.EvaluationOverranValue(tpl.Hash, 2)} {
		p.SetAnnotations(map[string]string{contract.AnnotationEvaluationOverran: stale})
		_, err = Render(tpl, p, nil, Options{Budget: b})
		require.EqualError(t, err, "1 evaluations that ran past --evaluation-timeout are still running (--max-overrunning-evaluations allows 1), and this object's evaluation ran past it before; it is evaluated again once fewer run", "%s: a suspect", stale)
		assert.False(t, OverranBefore(err))
	}
	ended()
	p.Object["spec"] = map[string]any{}
	_, err = Render(tpl, p, nil, Options{Budget: b})
	require.NoError(t, err, "under the cap, evaluated")
	assert.Equal(t, 1, b.Stats().Suspects, "and within the limits, no suspect: other is the only one")
}
