package webhooks

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cuengine/engine/evaluator"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

// TestMain makes the test binary an evaluator process when a pool runs it
// with the argument "evaluator", as `engine evaluator` is.
func TestMain(m *testing.M) {
	evaluator.ServeIfChild()
	os.Exit(m.Run())
}

// TestConverterInEvaluators: with evaluator processes, a review of 250
// objects goes to them in batches of batchSize and converts exactly as in
// the engine's process; one object that fails, in the second batch, fails
// the review naming it, as in process.
func TestConverterInEvaluators(t *testing.T) {
	set, err := templates.Load("../examples/versions/templates")
	require.NoError(t, err)
	self, err := os.Executable()
	require.NoError(t, err)
	pool := evaluator.New(evaluator.Options{Processes: 2, Command: []string{self, "evaluator"}})
	t.Cleanup(pool.Close)
	limits := render.Limits{EvaluationTimeout: 30 * time.Second}
	g := newGate(Bounds{})
	inPool := g.wrap(&converter{lookup: set.LookupGroupKind, limits: limits, gate: g, pool: pool})
	g2 := newGate(Bounds{})
	inProcess := g2.wrap(&converter{lookup: set.LookupGroupKind, limits: limits, gate: g2})

	objs := make([]runtime.RawExtension, 250)
	for i := range objs {
		objs[i] = appObject(t, fmt.Sprintf("a-%d", i), map[string]any{"image": "nginx", "replicas": i % 7})
	}
	want := review(t, inProcess, "apps.example.com/v2", objs...)
	require.Equal(t, metav1.StatusSuccess, want.Result.Status, want.Result.Message)
	got := review(t, inPool, "apps.example.com/v2", objs...)
	require.Equal(t, metav1.StatusSuccess, got.Result.Status, got.Result.Message)
	require.Len(t, got.ConvertedObjects, 250)
	for i := range objs {
		assert.JSONEq(t, string(want.ConvertedObjects[i].Raw), string(got.ConvertedObjects[i].Raw), "object %d", i)
	}

	objs[130] = appObject(t, "bad", map[string]any{"image": 5})
	want = review(t, inProcess, "apps.example.com/v2", objs...)
	got = review(t, inPool, "apps.example.com/v2", objs...)
	assert.Equal(t, metav1.StatusFailure, got.Result.Status)
	assert.Empty(t, got.ConvertedObjects, "never half a list")
	assert.Equal(t, want.Result.Message, got.Result.Message)
	assert.Contains(t, got.Result.Message, "App apps/bad (apps.example.com/v1): converting v1 to v2:")
}
