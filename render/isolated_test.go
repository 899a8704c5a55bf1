package render

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/evaluator"
	"github.com/cuengine/engine/templates"
)

// TestMain makes the test binary an evaluator process when a pool runs it
// with the argument "evaluator", as `engine evaluator` is.
func TestMain(m *testing.M) {
	evaluator.ServeIfChild()
	os.Exit(m.Run())
}

func isolatingBudget(t *testing.T) *Budget {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	pool := evaluator.New(evaluator.Options{Processes: 2, Command: []string{self, "evaluator"}})
	t.Cleanup(pool.Close)
	b := NewBudget(BudgetLimits{})
	b.Isolate(pool)
	return b
}

// TestIsolatedRunawayStopped: a template a parent can make as large as it
// likes (Greedy's quad) evaluates in a process; a runaway is stopped at
// the timeout, holds nothing in the engine afterwards, and its inputs are
// remembered; a healthy parent renders as in process.
func TestIsolatedRunawayStopped(t *testing.T) {
	tpl := testTemplate(t, greedyGVK)
	require.True(t, tpl.MayRunAway())
	b := isolatingBudget(t)
	opts := Options{Limits: Limits{EvaluationTimeout: 300 * time.Millisecond}, Budget: b}
	runaway := testParent(greedyGVK, "runaway", map[string]any{"quad": int64(100000)})

	_, err := Render(tpl, runaway, nil, opts)
	var re *Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, contract.ReasonEvaluationTimeout, re.Reason)
	assert.EqualError(t, err, "evaluating the template took longer than 300ms (--evaluation-timeout) and was stopped; it is not evaluated again for this object until its spec or the template changes")
	assert.Equal(t, 0, b.Stats().Overrunning, "nothing runs on in the engine")

	_, err = Render(tpl, runaway, nil, opts)
	require.Error(t, err)
	assert.True(t, Unevaluated(err), "the same inputs are refused without evaluating")

	healthy := testParent(greedyGVK, "healthy", map[string]any{"quad": int64(3), "count": int64(2)})
	want, err := Render(tpl, healthy, nil, Options{Limits: opts.Limits})
	require.NoError(t, err)
	got, err := Render(tpl, healthy, nil, opts)
	require.NoError(t, err)
	want.Result.Remembered, got.Result.Remembered = false, false
	assert.Equal(t, want, got, "rendered in a process as in the engine's")
}

// slowTemplate is Slow: an evaluation that grows with spec.n squared, n
// bounded by the schema (<= 100000), so vet has nothing to say of it and
// it evaluates in the engine's process, yet one of n in the thousands runs
// past any short timeout.
func slowTemplate(t *testing.T) (*templates.Template, schema.GroupVersionKind) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "slow.cue"), []byte(`import "list"

parent: {
	apiVersion: "unit.cuengine.dev/v1"
	kind:       "Slow"
	spec: n: *0 | int & >=0 & <=100000
}
status: sum: list.Sum([for i in list.Range(0, parent.spec.n, 1) for j in list.Range(0, parent.spec.n, 1) {i + j}])
`), 0o644))
	set, err := templates.Load(dir)
	require.NoError(t, err)
	tpl := set.Templates()[0]
	require.False(t, tpl.MayRunAway(), "bounded by its schema: vet has nothing to say")
	return tpl, schema.GroupVersionKind{Group: "unit.cuengine.dev", Version: "v1", Kind: "Slow"}
}

// TestSuspectIsolated: a template vet finds nothing to warn of evaluates
// in process, but an object whose evaluation ran past the timeout there is
// a suspect, and its next evaluation (a new generation) goes to a process,
// where it is stopped rather than left running.
func TestSuspectIsolated(t *testing.T) {
	tpl, gvk := slowTemplate(t)
	b := isolatingBudget(t)
	opts := Options{Limits: Limits{EvaluationTimeout: 200 * time.Millisecond}, Budget: b}

	p := testParent(gvk, "slow", map[string]any{"n": int64(60)})
	overrunOnce(t, b, tpl, p) // in process: it ran on past the timeout
	assert.Equal(t, 1, b.Stats().Suspects)

	p.SetGeneration(2)
	p.Object["spec"] = map[string]any{"n": int64(100000)}
	_, err := Render(tpl, p, nil, opts)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "was stopped", "a suspect: evaluated in a process, and stopped")
	assert.Equal(t, 0, b.Stats().Overrunning)

	p.SetGeneration(3)
	p.Object["spec"] = map[string]any{"n": int64(2)}
	out, err := Render(tpl, p, nil, opts)
	require.NoError(t, err)
	assert.Equal(t, int64(4), out.Result.Status["sum"])
}

// TestValidateIsolated: the admission webhook's check of a template that
// may run away runs in a process too, and says what the schema refuses as
// in process; ended is called once the check is over.
func TestValidateIsolated(t *testing.T) {
	tpl := testTemplate(t, greedyGVK)
	b := isolatingBudget(t)
	bad := testParent(greedyGVK, "bad", map[string]any{"count": int64(-1)})
	want := ValidateParent(tpl, bad, Limits{}, nil, nil, nil)
	require.Error(t, want)
	ended := 0
	err := ValidateParent(tpl, bad, Limits{}, b.pool, nil, func() { ended++ })
	var te *templates.Error
	require.ErrorAs(t, err, &te)
	assert.Equal(t, want.Error(), err.Error())
	assert.Equal(t, 1, ended)
	require.NoError(t, ValidateParent(tpl, testParent(greedyGVK, "good", map[string]any{"count": int64(1)}), Limits{}, b.pool, nil, nil))
}

// TestBudgetOverflowsToThePool: a template vet has nothing to say of runs
// away in the engine's process (its first overrun cannot be foreseen), as
// many times as the budget allows there; with a pool, the next evaluation
// of any object, which the budget would refuse ("no evaluation starts
// until fewer run": one count for the whole engine), is evaluated in an
// evaluator process instead, so no kind waits for another's runaways.
func TestBudgetOverflowsToThePool(t *testing.T) {
	tpl, gvk := slowTemplate(t)
	self, err := os.Executable()
	require.NoError(t, err)
	pool := evaluator.New(evaluator.Options{Processes: 2, Command: []string{self, "evaluator"}})
	t.Cleanup(pool.Close)
	b := NewBudget(BudgetLimits{MaxOverrunning: 1}) // no evaluation starts in process past 2
	b.Isolate(pool)
	opts := Options{Limits: Limits{EvaluationTimeout: time.Millisecond}, Budget: b}
	for i := range 2 {
		_, err := Render(tpl, testParent(gvk, "runaway-"+strconv.Itoa(i), map[string]any{"n": int64(200)}), nil, opts)
		var re *Error
		require.ErrorAs(t, err, &re)
		require.Equal(t, contract.ReasonEvaluationTimeout, re.Reason)
	}
	require.Equal(t, 2, b.Stats().Overrunning, "both run on in the engine's process")

	healthy := testParent(gvk, "healthy", map[string]any{"n": int64(2)})
	out, err := Render(tpl, healthy, nil, Options{Limits: Limits{EvaluationTimeout: 30 * time.Second}, Budget: b})
	require.NoError(t, err, "evaluated in an evaluator process, not refused over the budget")
	assert.Equal(t, int64(4), out.Result.Status["sum"])
	waitOverrunning(t, b, 0)
}
