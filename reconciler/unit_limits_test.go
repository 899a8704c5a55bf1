package reconciler

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/render"
)

var unitGreedy = schema.GroupVersionKind{Group: "unit.cuengine.dev", Version: "v1", Kind: "Greedy"}

// overrunning reads engine_evaluations_overrunning (package render's) as
// the engine's metrics endpoint serves it.
func overrunning(t *testing.T) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == "engine_evaluations_overrunning" {
			require.Len(t, f.GetMetric(), 1)
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	require.Fail(t, "engine_evaluations_overrunning is not registered")
	return 0
}

// limitExceeded reads engine_limit_exceeded_total for the env's kind and
// one limit (a contract.Reason*), or for every limit when none is given.
func (e *unitEnv) limitExceeded(limits ...string) float64 {
	e.t.Helper()
	if len(limits) == 0 {
		limits = []string{contract.ReasonEvaluationTimeout, contract.ReasonTooManyChildren, contract.ReasonRenderTooLarge}
	}
	var n float64
	for _, limit := range limits {
		m := &dto.Metric{}
		require.NoError(e.t, metricLimitExceeded.WithLabelValues(contract.KindString(e.r.gvk), limit).Write(m))
		n += m.GetCounter().GetValue()
	}
	return n
}

// rememberedOverLimit is the error the reconciler remembers for the
// parent's inputs having gone over a limit, or nil.
func (e *unitEnv) rememberedOverLimit(parent *unstructured.Unstructured) error {
	return e.r.budget.Remembered(e.kind.Template(), parent)
}

// TestEvaluationTimeout: an evaluation that outlives the timeout frees
// the worker at once with EvaluationTimeout; the same inputs are not
// evaluated again (no second background evaluation); another parent of the
// kind is reconciled meanwhile; a spec change is evaluated again.
func TestEvaluationTimeout(t *testing.T) {
	// quad 200 takes seconds (minutes under -race on a busy machine); a
	// parent of count 1 takes milliseconds. The timeout sits far from both.
	hostile := unitParent(unitGreedy, "hostile", map[string]any{"quad": int64(200)})
	trivial := unitParent(unitGreedy, "trivial", map[string]any{})
	e := newUnitEnv(t, unitGreedy, hostile, trivial)
	e.r.limits = render.Limits{EvaluationTimeout: 300 * time.Millisecond}
	before := overrunning(t)
	exceeded := e.limitExceeded(contract.ReasonEvaluationTimeout)

	_, err := e.reconcile(hostile)
	require.True(t, isTerminal(err), "over a limit is terminal: %v", err)
	msg := "evaluating the template took longer than 300ms (--evaluation-timeout); it is not evaluated again for this object until its spec or the template changes"
	assert.Equal(t, cond{metav1.ConditionFalse, contract.ReasonEvaluationTimeout, msg}, condOf(e.condition(hostile, contract.ConditionSynced)))
	assert.EqualError(t, e.rememberedOverLimit(hostile), msg, "remembered as over a limit")
	assert.Equal(t, exceeded+1, e.limitExceeded(contract.ReasonEvaluationTimeout), "counted by its limit")
	assert.Equal(t, before+1, overrunning(t), "the evaluation goes on in the background")
	assert.Equal(t, []unitEvent{{"Warning", contract.ReasonEvaluationTimeout, msg}}, e.events.take())
	evaluated := e.evaluations()

	_, err = e.reconcile(hostile)
	require.True(t, isTerminal(err))
	assert.Equal(t, evaluated, e.evaluations(), "the same inputs are not evaluated again")
	assert.Equal(t, before+1, overrunning(t), "no second background evaluation")
	assert.Empty(t, e.events.take(), "nor a second event")

	e.reconcileClean(trivial)
	assert.NotNil(t, e.get(configMapGVK, unitNamespace, "trivial-0"), "the other parent is served meanwhile")

	hostile = e.reread(hostile)
	hostile.Object["spec"] = map[string]any{"quad": int64(2)}
	hostile.SetGeneration(2)
	e.update(hostile)
	e.reconcileClean(hostile) // applies its child; the status follows
	e.reconcileClean(hostile)
	assert.Equal(t, cond{metav1.ConditionTrue, contract.ReasonSynced, "children and resources are applied"}, condOf(e.condition(hostile, contract.ConditionSynced)), "a new spec is evaluated again")

	// Wait for the background evaluation, so it does not load the tests
	// that follow; bounded.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	require.NoError(t, wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		return overrunning(t) == before, nil
	}), "the background evaluation ends")
}

// TestRenderLimits: a parent whose rendering has too many children or
// too many bytes is refused whole, before anything is applied.
func TestRenderLimits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spec   map[string]any
		reason string
		msg    string
	}{
		{"too many children", map[string]any{"count": int64(4)}, contract.ReasonTooManyChildren,
			"the template renders 4 children and resources for this object, more than the 3 allowed (--max-children); nothing was applied"},
		{"too large", map[string]any{"count": int64(2), "text": strings.Repeat("x", 600)}, contract.ReasonRenderTooLarge,
			"more than the 1000 allowed (--max-rendered-bytes); nothing was applied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := unitParent(unitGreedy, "big", tc.spec)
			e := newUnitEnv(t, unitGreedy, p)
			e.r.limits = render.Limits{MaxChildren: 3, MaxRenderedBytes: 1000}
			exceeded := e.limitExceeded(tc.reason)
			_, err := e.reconcile(p)
			require.True(t, isTerminal(err), "%v", err)
			c := e.condition(p, contract.ConditionSynced)
			require.NotNil(t, c)
			assert.Equal(t, tc.reason, c.Reason)
			assert.Contains(t, c.Message, tc.msg)
			require.Error(t, e.rememberedOverLimit(p), "remembered as over a limit")
			assert.Equal(t, c.Message, e.rememberedOverLimit(p).Error())
			assert.Equal(t, exceeded+1, e.limitExceeded(tc.reason), "counted by its limit")
			assert.Equal(t, map[string]int{"status Greedy": 1}, e.takeWrites(), "no child written")
			evaluated := e.evaluations()
			_, err = e.reconcile(p)
			require.True(t, isTerminal(err))
			assert.Equal(t, evaluated, e.evaluations(), "not evaluated again")
		})
	}
}

// TestStatusTooLarge: a status the apiserver refuses as too large is
// written without the template's fields, with a condition and a Warning
// event that say so. The status writer finds it after the reconcile, which
// itself succeeded.
func TestStatusTooLarge(t *testing.T) {
	p := unitParent(unitGreedy, "loud", map[string]any{"count": int64(0), "text": strings.Repeat("x", 5000)})
	e := newUnitEnv(t, unitGreedy, p)
	e.check = func(key string, obj client.Object) error {
		st, _, _ := unstructured.NestedMap(obj.(*unstructured.Unstructured).Object, "status")
		if b, _ := json.Marshal(st); key == "status Greedy" && len(b) > 3000 {
			return apierrors.NewRequestEntityTooLargeError("limit is 3000")
		}
		return nil
	}
	e.reconcileClean(p)
	c := e.condition(p, contract.ConditionSynced)
	require.NotNil(t, c)
	assert.Equal(t, contract.ReasonStatusTooLarge, c.Reason)
	msg := "the status the template renders is too large to store (Request entity too large: limit is 3000); the template's status fields keep their last values"
	assert.Equal(t, msg, c.Message)
	assert.Equal(t, []unitEvent{{Type: "Warning", Reason: contract.ReasonStatusTooLarge, Message: msg}}, e.events.take())
	cur := e.reread(p)
	_, found, _ := unstructured.NestedString(cur.Object, "status", "echo")
	assert.False(t, found, "the template's fields are not written")
	assert.Equal(t, map[string]int{"status Greedy": 2}, e.takeWrites(), "refused once, then written without them")

	e.reconcileClean(p)
	assert.Empty(t, e.takeWrites(), "the same inputs: settled on the status as stored, nothing tried again")
}

// TestBudgetShared: the reconcile shares the engine's budget with the
// other paths that render. Inputs another path (the rollout's hold check,
// say) found over a limit are not evaluated again by the reconcile; a
// parent whose evaluation overran, with a new spec while the budget is
// spent, is Synced=False EvaluationBudgetExceeded, not evaluated, and
// looked at again after BudgetRetry.
func TestBudgetShared(t *testing.T) {
	big := unitParent(unitGreedy, "big", map[string]any{"count": int64(4)})
	runaway := unitParent(unitGreedy, "runaway", map[string]any{"quad": int64(42)})
	e := newUnitEnv(t, unitGreedy, big, runaway)
	e.r.limits = render.Limits{MaxChildren: 3}
	// One evaluation past the timeout spends the budget for suspects.
	e.r.budget = render.NewBudget(render.BudgetLimits{MaxOverrunning: 1})
	msg := "the template renders 4 children and resources for this object, more than the 3 allowed (--max-children); nothing was applied"

	// Another path renders the parent first, with the same budget.
	_, err := render.Render(e.kind.Template(), e.reread(big), nil, render.Options{Limits: e.r.limits, Budget: e.r.budget})
	require.EqualError(t, err, msg)
	evaluated := e.evaluations()
	_, err = e.reconcile(big)
	require.True(t, isTerminal(err), "%v", err)
	assert.Equal(t, cond{metav1.ConditionFalse, contract.ReasonTooManyChildren, msg}, condOf(e.condition(big, contract.ConditionSynced)))
	assert.Equal(t, evaluated, e.evaluations(), "the reconcile does not evaluate it again")
	assert.Equal(t, int64(1), e.r.budget.Stats().Remembered)

	// The runaway overran on another path (its evaluation has ended since).
	_, err = render.Render(e.kind.Template(), e.reread(runaway), nil, render.Options{Limits: render.Limits{EvaluationTimeout: time.Millisecond}, Budget: e.r.budget})
	var re *render.Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, contract.ReasonEvaluationTimeout, re.Reason)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		return e.r.budget.Stats().Overrunning == 0, nil
	}))
	// Another runaway, far longer, still runs past the timeout.
	_, err = render.Render(e.kind.Template(), unitParent(unitGreedy, "longer", map[string]any{"quad": int64(200)}), nil, render.Options{Limits: render.Limits{EvaluationTimeout: time.Millisecond}, Budget: e.r.budget})
	require.ErrorAs(t, err, &re)
	require.Equal(t, contract.ReasonEvaluationTimeout, re.Reason)
	defer func() {
		// Its own bound: quad 200 under -race on a loaded machine runs for
		// minutes, and the test must not leave it burning the CPU.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		require.NoError(t, wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
			return e.r.budget.Stats().Overrunning == 0, nil
		}), "the longer runaway ends")
	}()
	runaway = e.reread(runaway)
	runaway.Object["spec"] = map[string]any{"quad": int64(43)}
	runaway.SetGeneration(2)
	e.update(runaway)
	evaluated = e.evaluations()
	res, err := e.reconcile(runaway)
	require.NoError(t, err, "not terminal: retried")
	assert.Equal(t, BudgetRetry, res.RequeueAfter)
	c := e.condition(runaway, contract.ConditionSynced)
	require.NotNil(t, c)
	assert.Equal(t, contract.ReasonEvaluationBudgetExceeded, c.Reason)
	assert.Equal(t, "1 evaluations that ran past --evaluation-timeout are still running (--max-overrunning-evaluations allows 1), and this object's evaluation ran past it before; it is evaluated again once fewer run", c.Message)
	assert.Equal(t, evaluated, e.evaluations(), "refused without evaluating")
	assert.Equal(t, int64(1), e.r.budget.Stats().Refused)
}
