package diff

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/cuengine/engine/render"
)

// TestDiffSharesTheBudget: `engine diff` renders with one budget: a parent
// over a limit is evaluated once however often it is diffed, and a parent
// whose evaluation overran is not evaluated while the budget is spent; it
// is reported failed with the reason.
func TestDiffSharesTheBudget(t *testing.T) {
	big := testParent(greedyGVK, "big", map[string]any{"count": int64(4)})
	runaway := testParent(greedyGVK, "runaway", map[string]any{"quad": int64(46)})
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	store := fake.NewClientBuilder().WithScheme(scheme).WithObjects(big, runaway).Build()
	// One evaluation past the timeout spends the budget for suspects.
	b := render.NewBudget(render.BudgetLimits{MaxOverrunning: 1})
	tpl := testTemplate(t, greedyGVK)
	diffOne := func(limits render.Limits, p *unstructured.Unstructured) string {
		var out strings.Builder
		d := &Differ{Client: store, Mapper: store.RESTMapper(), Out: &out, Limits: limits, Budget: b}
		sum, err := d.DiffKind(context.Background(), tpl, []*unstructured.Unstructured{p})
		require.NoError(t, err)
		assert.Equal(t, 1, sum.Failed)
		return out.String()
	}

	msg := "# Greedy ns/big: the new template fails: the template renders 4 children and resources for this object, more than the 3 allowed (--max-children); nothing was applied\n"
	assert.Equal(t, msg, diffOne(render.Limits{MaxChildren: 3}, big))
	assert.Equal(t, msg, diffOne(render.Limits{MaxChildren: 3}, big), "the same report")
	assert.Equal(t, render.BudgetStats{Evaluated: 1, Remembered: 1}, b.Stats(), "evaluated once")

	assert.Contains(t, diffOne(render.Limits{EvaluationTimeout: time.Millisecond}, runaway), "took longer than 1ms")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		return b.Stats().Overrunning == 0, nil
	}), "the background evaluation ends")
	// Another runaway, far longer, still runs past the timeout.
	longer := testParent(greedyGVK, "longer", map[string]any{"quad": int64(200)})
	assert.Contains(t, diffOne(render.Limits{EvaluationTimeout: time.Millisecond}, longer), "took longer than 1ms")
	defer func() {
		// Its own bound: quad 200 under -race on a loaded machine runs for
		// minutes, and the test must not leave it burning the CPU.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		require.NoError(t, wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
			return b.Stats().Overrunning == 0, nil
		}), "the longer runaway ends")
	}()
	evaluated := b.Stats().Evaluated
	runaway.Object["spec"] = map[string]any{"quad": int64(47)}
	runaway.SetGeneration(2)
	assert.Equal(t, "# Greedy ns/runaway: the new template fails: 1 evaluations that ran past --evaluation-timeout are still running (--max-overrunning-evaluations allows 1), and this object's evaluation ran past it before; it is evaluated again once fewer run\n", diffOne(render.Limits{}, runaway))
	assert.Equal(t, evaluated, b.Stats().Evaluated, "not evaluated")
}
