package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

func TestUnitUnifiedDiff(t *testing.T) {
	for _, tc := range []struct {
		name, a, b, want string
	}{
		{name: "equal", a: "x: 1\n", b: "x: 1\n", want: ""},
		{name: "a change ends with the last line, not an empty one",
			a: "a: 1\nb: 2\n", b: "a: 1\nb: 3\n",
			want: "--- live\n+++ new\n@@ -1,2 +1,2 @@\n a: 1\n-b: 2\n+b: 3\n"},
		{name: "no newline at the end", a: "a: 1", b: "a: 2",
			want: "--- live\n+++ new\n@@ -1 +1 @@\n-a: 1\n+a: 2\n"},
		{name: "created", a: "", b: "a: 1\n",
			want: "--- live\n+++ new\n@@ -0,0 +1 @@\n+a: 1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, UnifiedDiff("live", "new", tc.a, tc.b))
		})
	}
}

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

// TestUnitDiffStopsAtTheEvaluationTimeout: `engine diff` renders through
// the engine's door: a parent whose evaluation outlives the timeout is
// reported failed at it, with the message the engine gives.
func TestUnitDiffStopsAtTheEvaluationTimeout(t *testing.T) {
	// The reconciler's unit tests' Greedy template (as in its
	// TestUnitEvaluationTimeout): seconds against 300ms.
	set, err := templates.Load("../reconciler/testdata/unit")
	require.NoError(t, err)
	tpl, ok := set.Lookup(unitGreedy)
	require.True(t, ok)
	hostile := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"quad": int64(131)}}}
	hostile.SetGroupVersionKind(unitGreedy)
	hostile.SetNamespace("ns")
	hostile.SetName("hostile")
	hostile.SetUID(types.UID("uid-hostile"))
	hostile.SetGeneration(1)
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	store := fake.NewClientBuilder().WithScheme(scheme).WithObjects(hostile).Build()

	before := overrunning(t)
	var out strings.Builder
	d := &Differ{Client: store, Mapper: store.RESTMapper(), Out: &out, Limits: render.Limits{EvaluationTimeout: 300 * time.Millisecond}}
	sum, err := d.DiffKind(context.Background(), tpl, []*unstructured.Unstructured{hostile})
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Failed)
	assert.Contains(t, out.String(), "# Greedy ns/hostile: the new template fails: evaluating the template took longer than 300ms (--evaluation-timeout)")

	// The evaluation ends in the background; bounded.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	require.NoError(t, wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		return overrunning(t) == before, nil
	}), "the background evaluation ends")
}
