package rollout

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

var greedyKind = schema.GroupVersionKind{Group: "unit.cuengine.dev", Version: "v1", Kind: "Greedy"}

// greedyParent is a Greedy parent (../testdata/unit/greedy.cue) and the
// ConfigMap it owns.
func greedyParent(name string, spec map[string]any) (*unstructured.Unstructured, []client.Object) {
	p := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	p.SetGroupVersionKind(greedyKind)
	p.SetNamespace("ns")
	p.SetName(name)
	p.SetUID(types.UID("uid-" + name))
	p.SetGeneration(1)
	child := &unstructured.Unstructured{}
	child.SetAPIVersion("v1")
	child.SetKind("ConfigMap")
	child.SetNamespace("ns")
	child.SetName(name + "-0")
	child.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "unit.cuengine.dev/v1", Kind: "Greedy", Name: name, UID: p.GetUID(), Controller: ptr.To(true)}})
	return p, []client.Object{child}
}

func greedyTemplate(t *testing.T) *templates.Template {
	t.Helper()
	set, err := templates.Load("../testdata/unit")
	require.NoError(t, err)
	tpl, ok := set.Lookup(greedyKind)
	require.True(t, ok)
	return tpl
}

// TestHoldSharesTheBudget: the hold check renders with the engine's
// budget. A parent it finds over a limit is remembered for every other
// path (its reconcile does not evaluate it again), and is not evaluated a
// second time by the hold check itself; a parent whose evaluation overran,
// while the budget is spent, is not evaluated at all: each is left to its
// reconcile, and counts no deletion.
func TestHoldSharesTheBudget(t *testing.T) {
	tpl := greedyTemplate(t)
	// One evaluation past the timeout spends the budget for suspects.
	b := render.NewBudget(render.BudgetLimits{MaxOverrunning: 1})
	hold := Hold{Limits: render.Limits{MaxChildren: 3}, Budget: b}

	big, children := greedyParent("big", map[string]any{"count": int64(4)})
	held := &HoldError{}
	require.NoError(t, hold.countDeletes(tpl, big, children, held))
	assert.Zero(t, held.Deletes, "left to the reconcile")
	assert.EqualError(t, b.Remembered(tpl, big), "the template renders 4 children and resources for this object, more than the 3 allowed (--max-children); nothing was applied",
		"remembered for the reconcile")
	require.NoError(t, hold.countDeletes(tpl, big, children, held))
	assert.Equal(t, render.BudgetStats{Evaluated: 1, Remembered: 1}, b.Stats(), "not evaluated twice")

	runaway, children := greedyParent("runaway", map[string]any{"quad": int64(44)})
	require.NoError(t, Hold{Limits: render.Limits{EvaluationTimeout: time.Millisecond}, Budget: b}.countDeletes(tpl, runaway, children, held))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		return b.Stats().Overrunning == 0, nil
	}), "the background evaluation ends")
	assert.Equal(t, 1, b.Stats().Suspects)

	// Another runaway, far longer, still runs past the timeout.
	longer, _ := greedyParent("longer", map[string]any{"quad": int64(200)})
	_, err := render.Render(tpl, longer, nil, render.Options{Limits: render.Limits{EvaluationTimeout: time.Millisecond}, Budget: b})
	require.Error(t, err)
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
	runaway.Object["spec"] = map[string]any{"quad": int64(45)}
	runaway.SetGeneration(2)
	require.NoError(t, hold.countDeletes(tpl, runaway, children, held))
	assert.Zero(t, held.Deletes)
	assert.Equal(t, evaluated, b.Stats().Evaluated, "a suspect over the budget is not evaluated")
	assert.Equal(t, int64(1), b.Stats().Refused)
}
