package evaluator

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/cuengine/engine/templates"
)

// TestMain makes the test binary an evaluator process when the pool runs
// it with the argument "evaluator", as `engine evaluator` is.
func TestMain(m *testing.M) {
	ServeIfChild()
	os.Exit(m.Run())
}

func testPool(t *testing.T, opts Options) *Pool {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	opts.Command = []string{self, "evaluator"}
	p := New(opts)
	t.Cleanup(p.Close)
	return p
}

// examples are the custom resources of examples/crs, each with the
// template of its kind in examples/templates.
func examples(t *testing.T) (*templates.Set, []*unstructured.Unstructured) {
	set, err := templates.Load("../examples/templates")
	require.NoError(t, err)
	files, err := filepath.Glob("../examples/crs/*.yaml")
	require.NoError(t, err)
	var out []*unstructured.Unstructured
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, doc := range strings.Split(string(raw), "\n---") {
			obj := map[string]any{}
			require.NoError(t, yaml.Unmarshal([]byte(doc), &obj), f)
			if len(obj) == 0 {
				continue
			}
			u := &unstructured.Unstructured{Object: obj}
			if u.GetNamespace() == "" {
				u.SetNamespace("default")
			}
			u.SetUID("5f2b1c9e-0000-4000-8000-000000000001")
			u.SetGeneration(1)
			out = append(out, u)
		}
	}
	require.NotEmpty(t, out)
	return set, out
}

// TestEvaluateAsInProcess: every example parent renders the same in a
// process as in the engine's own, the children, resources and status
// equal to the number types (integers int64, as the engine decodes them).
func TestEvaluateAsInProcess(t *testing.T) {
	set, parents := examples(t)
	p := testPool(t, Options{})
	evaluated := 0
	for _, parent := range parents {
		tmpl, ok := set.Lookup(parent.GroupVersionKind())
		if !ok {
			continue // a kind of no template here (a referenced object)
		}
		for _, observed := range []map[string]any{nil, {"nothing": map[string]any{"kind": "ConfigMap", "data": map[string]any{"n": int64(3)}}}} {
			want, wantErr := tmpl.Evaluate(templates.Input{Parent: parent.DeepCopy(), Observed: observed})
			got, err := p.Evaluate(context.Background(), Key{Kind: parent.GetKind(), Namespace: parent.GetNamespace()}, 30*time.Second, tmpl, templates.Input{Parent: parent, Observed: observed})
			if wantErr != nil {
				require.Error(t, err, parent.GetName())
				assert.Equal(t, wantErr.Error(), err.Error(), parent.GetName())
				assert.IsType(t, wantErr, err, "the error keeps its type across the process boundary")
				continue
			}
			require.NoError(t, err, parent.GetName())
			want.Remembered, got.Remembered = false, false
			assert.Equal(t, want, got, parent.GetName())
			evaluated++
		}
	}
	assert.GreaterOrEqual(t, evaluated, 8, "the examples' parents evaluated")
}

func greedy(t *testing.T) *templates.Template {
	t.Helper()
	set, err := templates.Load("../testdata/unit")
	require.NoError(t, err)
	for _, tmpl := range set.Templates() {
		if tmpl.GVK.Kind == "Greedy" {
			return tmpl
		}
	}
	t.Fatal("no Greedy template in testdata/unit")
	return nil
}

func greedyParent(name string, quad int64) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "unit.cuengine.dev/v1", "kind": "Greedy",
		"metadata": map[string]any{"name": name, "namespace": "tenant-a", "uid": "u-" + name, "generation": int64(1)},
		"spec":     map[string]any{"quad": quad, "text": "hi"},
	}}
	return u
}

// TestRunawayStopped: an evaluation past the timeout is stopped, its
// process killed, and the next evaluation served by a new one.
func TestRunawayStopped(t *testing.T) {
	tmpl := greedy(t)
	p := testPool(t, Options{Processes: 1, PerKind: 1, PerNamespace: 1})
	key := Key{Kind: "Greedy", Namespace: "tenant-a"}
	_, err := p.Evaluate(context.Background(), key, 300*time.Millisecond, tmpl, templates.Input{Parent: greedyParent("runaway", 100000)})
	var le *LimitError
	require.ErrorAs(t, err, &le)
	assert.False(t, le.Memory)
	assert.EqualError(t, err, "the evaluation took longer than 300ms (--evaluation-timeout) and was stopped")

	res, err := p.Evaluate(context.Background(), key, 30*time.Second, tmpl, templates.Input{Parent: greedyParent("healthy", 3)})
	require.NoError(t, err)
	assert.Equal(t, int64(18), res.Status["sum"], "sum of i+j for i, j < 3")
}

// TestMemoryStopped: an evaluation past the process's memory is stopped
// before the timeout.
func TestMemoryStopped(t *testing.T) {
	tmpl := greedy(t)
	p := testPool(t, Options{Processes: 1, MemoryBytes: 160 << 20})
	start := time.Now()
	_, err := p.Evaluate(context.Background(), Key{Kind: "Greedy"}, 10*time.Minute, tmpl, templates.Input{Parent: greedyParent("fat", 100000)})
	var le *LimitError
	require.ErrorAs(t, err, &le)
	assert.True(t, le.Memory, "stopped for its memory, not its time")
	assert.Less(t, time.Since(start), 10*time.Minute)
}

// TestTemplateErrorCrosses: a template's error keeps its positions and
// paths, and the process serves on.
func TestTemplateErrorCrosses(t *testing.T) {
	tmpl := greedy(t)
	p := testPool(t, Options{Processes: 1})
	bad := greedyParent("bad", 1)
	bad.Object["spec"].(map[string]any)["count"] = int64(-1)
	want := tmpl.ValidateParent(bad)
	require.Error(t, want)
	err := p.ValidateParent(context.Background(), Key{Kind: "Greedy"}, 30*time.Second, tmpl, bad)
	var te *templates.Error
	require.ErrorAs(t, err, &te)
	assert.Equal(t, want.Error(), err.Error())
	assert.Contains(t, err.Error(), "parent.spec.count")
	require.NoError(t, p.ValidateParent(context.Background(), Key{Kind: "Greedy"}, 30*time.Second, tmpl, greedyParent("good", 1)))
}

// TestShares: one kind's evaluations hold at most PerKind processes and
// one namespace's at most PerNamespace, so the others are served while
// they run away.
func TestShares(t *testing.T) {
	tmpl := greedy(t)
	p := testPool(t, Options{Processes: 3}) // PerKind 2, PerNamespace 1
	runaway := Key{Kind: "Greedy", Namespace: "tenant-a"}
	started := make(chan error, 1)
	go func() {
		_, err := p.Evaluate(context.Background(), runaway, time.Minute, tmpl, templates.Input{Parent: greedyParent("runaway", 100000)})
		started <- err
	}()
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.spaces[runaway] == 1
	}, 10*time.Second, 5*time.Millisecond)

	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := p.Evaluate(short, runaway, time.Minute, tmpl, templates.Input{Parent: greedyParent("second", 1)})
	var be *BusyError
	require.ErrorAs(t, err, &be, "the namespace holds its one process")
	assert.Contains(t, err.Error(), "in namespace tenant-a")

	res, err := p.Evaluate(context.Background(), Key{Kind: "Greedy", Namespace: "tenant-b"}, 30*time.Second, tmpl, templates.Input{Parent: greedyParent("other-tenant", 2)})
	require.NoError(t, err, "another tenant of the kind is served")
	assert.Equal(t, int64(4), res.Status["sum"])
	_, err = p.Evaluate(context.Background(), Key{Kind: "Other", Namespace: "tenant-a"}, 30*time.Second, tmpl, templates.Input{Parent: greedyParent("other-kind", 2)})
	require.NoError(t, err, "another kind is served")

	p.Close()
	require.Error(t, <-started, "closing the pool stops the runaway")
	_, err = p.Evaluate(context.Background(), runaway, time.Minute, tmpl, templates.Input{Parent: greedyParent("late", 1)})
	require.Error(t, err)
	assert.False(t, errors.As(err, &be))
}

// TestTotalStopsTheLargest: past Options.TotalBytes (the engine's and its
// processes' resident sets together), the idle process is stopped first,
// then the busy one holding the most, well below its own MemoryBytes.
func TestTotalStopsTheLargest(t *testing.T) {
	tmpl := greedy(t)
	const total = 300 << 20
	p := testPool(t, Options{Processes: 2, MemoryBytes: 4 << 30, TotalBytes: total})
	spare, err := p.process() // two processes, idle
	require.NoError(t, err)
	other, err := p.process()
	require.NoError(t, err)
	p.put(spare)
	p.put(other)
	runaway := make(chan error, 1)
	go func() {
		_, err := p.Evaluate(context.Background(), Key{Kind: "Greedy", Namespace: "tenant-a"}, 10*time.Minute, tmpl, templates.Input{Parent: greedyParent("fat", 100000)})
		runaway <- err
	}()
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.busy == 1 && len(p.idle) == 1 && p.idle[0] == spare // the runaway took the other
	}, 10*time.Second, 5*time.Millisecond)

	err = <-runaway
	var le *LimitError
	require.ErrorAs(t, err, &le)
	assert.True(t, le.Memory && le.Total, "stopped for the total, not its own memory: %v", err)
	assert.Greater(t, le.Held, uint64(total/3), "the process stopped held more than its share")
	assert.Less(t, le.Held, uint64(4<<30))
	assert.Contains(t, err.Error(), "(--evaluator-total-memory)")
	select {
	case <-spare.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the idle process was not stopped first")
	}

	res, err := p.Evaluate(context.Background(), Key{Kind: "Greedy", Namespace: "tenant-a"}, 30*time.Second, tmpl, templates.Input{Parent: greedyParent("after", 3)})
	require.NoError(t, err, "the pool serves on in new processes")
	assert.Equal(t, int64(18), res.Status["sum"])
}
