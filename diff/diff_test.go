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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

const testNamespace = "ns"

var greedyGVK = schema.GroupVersionKind{Group: "unit.cuengine.dev", Version: "v1", Kind: "Greedy"}

// testParent is a parent as the apiserver stores it: namespaced, with a
// UID and a generation.
func testParent(gvk schema.GroupVersionKind, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(testNamespace)
	u.SetName(name)
	u.SetUID(types.UID("uid-" + name))
	u.SetGeneration(1)
	return u
}

func testTemplate(t *testing.T, gvk schema.GroupVersionKind) *templates.Template {
	t.Helper()
	set, err := templates.Load("../testdata/unit") // the unit templates the packages share
	require.NoError(t, err)
	tpl, ok := set.Lookup(gvk)
	require.True(t, ok, "a template for %s in testdata", gvk.Kind)
	return tpl
}

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

// TestDiffStopsAtTheEvaluationTimeout: `engine diff` renders through the
// engine's door: a parent whose evaluation outlives the timeout is
// reported failed at it, with the message the engine gives.
func TestDiffStopsAtTheEvaluationTimeout(t *testing.T) {
	// Seconds against 300ms, as in engine's TestEvaluationTimeout.
	hostile := testParent(greedyGVK, "hostile", map[string]any{"quad": int64(200)})
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	store := fake.NewClientBuilder().WithScheme(scheme).WithObjects(hostile).Build()
	before := overrunning(t)
	var out strings.Builder
	d := &Differ{Client: store, Mapper: store.RESTMapper(), Out: &out, Limits: render.Limits{EvaluationTimeout: 300 * time.Millisecond}}
	sum, err := d.DiffKind(context.Background(), testTemplate(t, greedyGVK), []*unstructured.Unstructured{hostile})
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Failed)
	assert.Contains(t, out.String(), "# Greedy "+testNamespace+"/hostile: the new template fails: evaluating the template took longer than 300ms (--evaluation-timeout)")

	// The evaluation ends in the background; bounded.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	require.NoError(t, wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		return overrunning(t) == before, nil
	}), "the background evaluation ends")
}
