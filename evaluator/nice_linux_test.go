package evaluator

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cuengine/engine/templates"
)

// TestEvaluatorsYieldTheCPU: every thread of an evaluator process runs at
// Niceness, the engine's own at the niceness it had.
func TestEvaluatorsYieldTheCPU(t *testing.T) {
	set, parents := examples(t)
	p := testPool(t, Options{Processes: 1})
	tmpl, ok := set.Lookup(parents[0].GroupVersionKind())
	require.True(t, ok)
	_, err := p.Evaluate(context.Background(), Key{Kind: "test", Namespace: "default"}, 30*time.Second, tmpl, templates.Input{Parent: parents[0]})
	require.NoError(t, err)

	children := childProcesses(t)
	require.Len(t, children, 1, "the pool's one process")
	threads := niceness(t, children[0])
	require.NotEmpty(t, threads)
	for tid, nice := range threads {
		assert.Equal(t, Niceness, nice, "thread %d of the evaluator process", tid)
	}
	for tid, nice := range niceness(t, os.Getpid()) {
		assert.NotEqual(t, Niceness, nice, "thread %d of the engine's own process", tid)
	}
}

// childProcesses are the processes whose parent is this one.
func childProcesses(t *testing.T) []int {
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f := statFields("/proc/" + e.Name() + "/stat"); len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) {
			out = append(out, pid)
		}
	}
	return out
}

// niceness is each thread's niceness of pid (/proc/PID/task/TID/stat,
// the 19th field).
func niceness(t *testing.T, pid int) map[int]int {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	out := map[int]int{}
	for _, e := range entries {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f := statFields(dir + "/" + e.Name() + "/stat")
		if len(f) < 17 {
			continue // ended meanwhile
		}
		nice, err := strconv.Atoi(f[16])
		require.NoError(t, err)
		out[tid] = nice
	}
	return out
}

// statFields are the fields of a stat file after "pid (comm)": the
// state first.
func statFields(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
}
