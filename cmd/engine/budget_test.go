package main

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cuengine/engine/render"
)

// greedyDir writes a templates directory with the Greedy unit template and
// a parent of four children, over --max-children 3.
func greedyDir(t *testing.T) (dir string, parent []byte) {
	t.Helper()
	dir = t.TempDir()
	src, err := os.ReadFile("../../testdata/unit/greedy.cue")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "greedy.cue"), src, 0o644))
	return dir, []byte("apiVersion: unit.cuengine.dev/v1\nkind: Greedy\nmetadata: {name: big, namespace: default}\nspec: {count: 4}\n")
}

const overMaxChildren = "the template renders 4 children and resources for this object, more than the 3 allowed (--max-children); nothing was applied"

// TestRenderSharesTheBudget: `engine render` renders with one budget: an
// object given twice over a limit is evaluated once, and reported twice.
func TestRenderSharesTheBudget(t *testing.T) {
	dir, parent := greedyDir(t)
	file := filepath.Join(t.TempDir(), "parents.yaml")
	require.NoError(t, os.WriteFile(file, append(append(parent, "---\n"...), parent...), 0o644))
	o := &renderOptions{templates: dir, file: file, limits: render.Limits{MaxChildren: 3}, budget: render.NewBudget(render.BudgetLimits{})}
	var stdout, stderr bytes.Buffer
	require.Error(t, o.run(nil, &stdout, &stderr))
	assert.Equal(t, strings.Repeat("Greedy big: "+overMaxChildren+"\n", 2), stderr.String())
	assert.Equal(t, render.BudgetStats{Evaluated: 1, Remembered: 1}, o.budget.Stats())
}

// TestTestSharesTheBudget: so does `engine test`: two cases of the same
// object over a limit evaluate it once, and both fail with the limit.
func TestTestSharesTheBudget(t *testing.T) {
	dir, parent := greedyDir(t)
	for _, c := range []string{"one", "two"} {
		cases := filepath.Join(dir, "tests", "greedy", c)
		require.NoError(t, os.MkdirAll(cases, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(cases, "parent.yaml"), parent, 0o644))
	}
	o := &testOptions{templates: dir, limits: render.Limits{MaxChildren: 3}, budget: render.NewBudget(render.BudgetLimits{})}
	var stdout bytes.Buffer
	require.Error(t, o.runTests(&stdout))
	assert.Equal(t, 2, strings.Count(stdout.String(), overMaxChildren), stdout.String())
	assert.Equal(t, render.BudgetStats{Evaluated: 1, Remembered: 1}, o.budget.Stats())
}

// TestVetRefusesTemplatesTooLargeToStore: `engine vet` refuses a 1.7 MB
// template with its size and the limit a revision may take.
func TestVetRefusesTemplatesTooLargeToStore(t *testing.T) {
	dir, _ := greedyDir(t)
	src, err := os.ReadFile(filepath.Join(dir, "greedy.cue"))
	require.NoError(t, err)
	big := append(src, strings.Repeat("// "+strings.Repeat("x", 96)+"\n", 17_000)...)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "greedy.cue"), big, 0o644))
	_, errOut, code := run(t, "vet", "--templates", dir)
	assert.Equal(t, 1, code)
	assert.Regexp(t, `^greedy\.cue: the template's files take 17\d{5} bytes \(1\.6\d MiB\) as a stored revision, more than the 1310720 \(1\.25 MiB\) allowed: etcd refuses requests over 1\.5 MiB`, errOut)
}

// TestVetWarnsOfUnboundedRanges: `engine vet` warns, at its line, of each
// list.Range whose size comes from a parent field the schema does not
// bound, and still succeeds.
func TestVetWarnsOfUnboundedRanges(t *testing.T) {
	dir, _ := greedyDir(t)
	out, errOut, code := run(t, "vet", "--templates", dir)
	assert.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "ok  greedy.cue")
	const tail = ", which the schema does not bound: a parent can make this evaluation as large as it likes, so the engine evaluates this template in its evaluator processes, where one past --evaluation-timeout or --evaluator-memory is stopped, at a cost to every evaluation; bound the field, as in "
	assert.Equal(t, "warning: greedy.cue:19:11: list.Range over parent.spec.count"+tail+"count: *0 | int & >=0 & <=1000\n"+
		"warning: greedy.cue:30:34: list.Range over parent.spec.quad"+tail+"quad: *0 | int & >=0 & <=1000\n"+
		"warning: greedy.cue:30:78: list.Range over parent.spec.quad"+tail+"quad: *0 | int & >=0 & <=1000\n", errOut)
}

// TestEvaluationHeapFlags: `engine run` reads the budget's heap bars as
// quantities, the hard one too, and refuses what is not one.
func TestEvaluationHeapFlags(t *testing.T) {
	o := &runOptions{}
	cmd := &cobra.Command{}
	o.addFlags(cmd)
	require.NoError(t, cmd.Flags().Parse([]string{"--max-evaluation-heap", "345Mi", "--max-evaluation-heap-hard", "460Mi"}))
	b, err := o.evaluationBudget()
	require.NoError(t, err)
	assert.Equal(t, render.BudgetLimits{MaxOverrunning: render.DefaultMaxOverrunning, MaxHeapBytes: 345 << 20, HardHeapBytes: 460 << 20}, b)

	o.maxEvaluationHeapHard = "lots"
	_, err = o.evaluationBudget()
	require.EqualError(t, err, `--max-evaluation-heap-hard: "lots" is not a positive quantity such as 900Mi`)
}

// TestEvaluatorTotalMemory: --evaluator-total-memory is nine tenths of
// the container's memory limit by default, none without a limit, and a
// quantity or 0 when given.
func TestEvaluatorTotalMemory(t *testing.T) {
	limit := func(l uint64, err error) func() (uint64, error) { return func() (uint64, error) { return l, err } }
	for _, c := range []struct {
		name, flag string
		limit      func() (uint64, error)
		want       uint64
		err        string
	}{
		{"auto from a 1 GiB container", "auto", limit(1<<30, nil), 966367641 /* 0.9 GiB */, ""},
		{"auto from a 512 MiB container", "auto", limit(512<<20, nil), 483183820 /* 0.9 x 512 MiB */, ""},
		{"auto without a limit", "auto", limit(math.MaxUint64, nil), 0, ""},
		{"auto without a cgroup", "auto", limit(0, errors.New("no cgroup")), 0, ""},
		{"given", "900Mi", limit(1<<30, nil), 900 << 20, ""},
		{"off", "0", limit(1<<30, nil), 0, ""},
		{"not a quantity", "lots", nil, 0, `--evaluator-total-memory: "lots" is not auto or a quantity such as 900Mi`},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := &runOptions{}
			cmd := &cobra.Command{}
			o.addFlags(cmd)
			require.NoError(t, cmd.Flags().Parse([]string{"--evaluator-total-memory", c.flag}))
			o.evaluators.containerLimit = c.limit
			pool, err := o.evaluators.pool()
			if c.err != "" {
				require.EqualError(t, err, c.err)
				return
			}
			require.NoError(t, err)
			defer pool.Close()
			assert.Equal(t, c.want, pool.Options().TotalBytes)
		})
	}
}
