package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// asCLI, set in a child process's environment, makes the test binary run
// the engine's main with its arguments: a command that outlives a runaway
// evaluation ends, and the evaluation with it, as the real binary's would.
const asCLI = "ENGINE_TEST_AS_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(asCLI) == "1" || len(os.Args) > 1 && os.Args[1] == "evaluator" {
		// As the CLI, or as an evaluator process of an engine run in this
		// binary (its pool runs this executable with "evaluator").
		os.Args = append([]string{"engine"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runProcess runs the CLI as its own process, bounded by a minute.
func runProcess(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), asCLI+"=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "the command did not return within a minute; stderr:\n%s", errOut.String())
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return out.String(), errOut.String(), exit.ExitCode()
	}
	require.NoError(t, err)
	return out.String(), errOut.String(), 0
}

// runaway writes a templates directory with the Greedy template of the
// reconciler's unit tests and a parent whose evaluation takes hours.
func runaway(t *testing.T) (dir, parent string) {
	t.Helper()
	dir = t.TempDir()
	src, err := os.ReadFile("../../testdata/unit/greedy.cue")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "greedy.cue"), src, 0o644))
	parent = filepath.Join(t.TempDir(), "runaway.yaml")
	require.NoError(t, os.WriteFile(parent, []byte("apiVersion: unit.cuengine.dev/v1\nkind: Greedy\nmetadata: {name: runaway, namespace: default}\nspec: {quad: 2000}\n"), 0o644))
	return dir, parent
}

const evaluationTimeoutMessage = "evaluating the template took longer than 200ms (--evaluation-timeout)"

// TestRenderStopsAtTheEvaluationTimeout: `engine render` of a template
// whose evaluation never ends returns at --evaluation-timeout with the
// message `engine run` puts on the object.
func TestRenderStopsAtTheEvaluationTimeout(t *testing.T) {
	dir, parent := runaway(t)
	_, errOut, code := runProcess(t, "render", "--templates", dir, "-f", parent, "--evaluation-timeout", "200ms")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "Greedy runaway: "+evaluationTimeoutMessage)
}

// TestTestStopsAtTheEvaluationTimeout: so does a case of `engine test`.
func TestTestStopsAtTheEvaluationTimeout(t *testing.T) {
	dir, parent := runaway(t)
	cases := filepath.Join(dir, "tests", "greedy", "runaway")
	require.NoError(t, os.MkdirAll(cases, 0o755))
	src, err := os.ReadFile(parent)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(cases, "parent.yaml"), src, 0o644))
	stdout, errOut, code := runProcess(t, "test", "--templates", dir, "--evaluation-timeout", "200ms")
	assert.Equal(t, 1, code, "stdout:\n%s\nstderr:\n%s", stdout, errOut)
	assert.Contains(t, stdout+errOut, evaluationTimeoutMessage)
}
