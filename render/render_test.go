package render

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates"
)

var (
	greedyGVK = schema.GroupVersionKind{Group: "unit.cuengine.dev", Version: "v1", Kind: "Greedy"}
	brokenGVK = schema.GroupVersionKind{Group: "unit.cuengine.dev", Version: "v1", Kind: "Broken"}
	leakyGVK  = schema.GroupVersionKind{Group: "test.cuengine.dev", Version: "v1", Kind: "Leaky"}
)

// testTemplates are this package's templates (testdata) and the unit
// templates the packages share (../testdata/unit).
var testTemplates = sync.OnceValues(func() (map[schema.GroupVersionKind]*templates.Template, error) {
	out := map[schema.GroupVersionKind]*templates.Template{}
	for _, dir := range []string{"testdata", "../testdata/unit"} {
		set, err := templates.Load(dir)
		if err != nil {
			return nil, err
		}
		for _, t := range set.Templates() {
			out[t.GVK] = t
		}
	}
	return out, nil
})

func testTemplate(t *testing.T, gvk schema.GroupVersionKind) *templates.Template {
	t.Helper()
	set, err := testTemplates()
	require.NoError(t, err)
	tpl, ok := set[gvk]
	require.True(t, ok, "a template for %s in testdata", gvk.Kind)
	return tpl
}

func overrunning(t *testing.T) float64 {
	t.Helper()
	m := &dto.Metric{}
	require.NoError(t, metricEvaluationsOverrunning.Write(m))
	return m.GetGauge().GetValue()
}

// TestRenderLimits: a rendering with too many children or too many bytes
// is refused whole, with an *Error whose reason names the limit and whose
// message is the Synced condition's.
func TestRenderLimits(t *testing.T) {
	tpl := testTemplate(t, greedyGVK)
	limits := Limits{MaxChildren: 3, MaxRenderedBytes: 1000}
	for _, tc := range []struct {
		name   string
		spec   map[string]any
		reason string
		msg    string
	}{
		{"too many children", map[string]any{"count": int64(4)}, contract.ReasonTooManyChildren,
			"the template renders 4 children and resources for this object, more than the 3 allowed (--max-children); nothing was applied"},
		{"too large", map[string]any{"count": int64(2), "text": strings.Repeat("x", 600)}, contract.ReasonRenderTooLarge,
			"more than the 1000 allowed (--max-rendered-bytes); nothing was applied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Render(tpl, testParent(greedyGVK, "big", tc.spec), nil, Options{Limits: limits})
			assert.Nil(t, out)
			var re *Error
			require.ErrorAs(t, err, &re)
			assert.Equal(t, tc.reason, re.Reason)
			assert.Contains(t, err.Error(), tc.msg)
			assert.Equal(t, re.Err.Error(), err.Error(), "the message is the refusal's, with nothing added")
		})
	}
	t.Run("within the limits", func(t *testing.T) {
		out, err := Render(tpl, testParent(greedyGVK, "small", map[string]any{"count": int64(3)}), nil, Options{Limits: limits})
		require.NoError(t, err)
		assert.Len(t, out.Children, 3)
	})
	t.Run("zero limits are the defaults", func(t *testing.T) {
		assert.Equal(t, DefaultLimits, Limits{}.WithDefaults())
		assert.Equal(t, Limits{EvaluationTimeout: time.Second, MaxChildren: DefaultLimits.MaxChildren, MaxRenderedBytes: 5},
			Limits{EvaluationTimeout: time.Second, MaxRenderedBytes: 5}.WithDefaults())
	})
}

// TestRenderTemplateErrorIsNotALimit: an evaluation error is the template's
// own, not an *Error: the engine reports it as TemplateError or InvalidSpec
// and does not remember it as a limit exceeded.
func TestRenderTemplateErrorIsNotALimit(t *testing.T) {
	_, err := Render(testTemplate(t, brokenGVK), testParent(brokenGVK, "broken", map[string]any{"name": "Bad1"}), nil, Options{})
	require.Error(t, err)
	var re *Error
	assert.False(t, errors.As(err, &re), "not a refused rendering: %v", err)
	var te *templates.Error
	assert.ErrorAs(t, err, &te)
}

// TestRenderEvaluationTimeout: an evaluation that outlives the timeout
// returns at once with EvaluationTimeout, and is counted as overrunning
// until it ends in the background.
func TestRenderEvaluationTimeout(t *testing.T) {
	// quad 150 takes a second or more (minutes under -race on a busy
	// machine); the timeout is far from it.
	hostile := testParent(greedyGVK, "hostile", map[string]any{"quad": int64(150)})
	before := overrunning(t)
	start := time.Now()
	_, err := Render(testTemplate(t, greedyGVK), hostile, nil, Options{Limits: Limits{EvaluationTimeout: 100 * time.Millisecond}})
	assert.Less(t, time.Since(start), 30*time.Second, "the caller does not wait for the evaluation")
	var re *Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, contract.ReasonEvaluationTimeout, re.Reason)
	assert.EqualError(t, err, "evaluating the template took longer than 100ms (--evaluation-timeout); it is not evaluated again for this object until its spec or the template changes")
	assert.Equal(t, before+1, overrunning(t), "the evaluation goes on in the background")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	require.NoError(t, wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		return overrunning(t) == before, nil
	}), "the background evaluation ends")
}

// TestRenderRefusesChildren: a child the policy refuses is in Refused, an
// *Error of reason ChildRefused wrapping the *ChildError; the others are
// rendered.
func TestRenderRefusesChildren(t *testing.T) {
	out, err := Render(testTemplate(t, leakyGVK), testParent(leakyGVK, "leaky", map[string]any{}), nil, Options{})
	require.NoError(t, err, "a refused child is not an error of the rendering")
	require.Len(t, out.Children, 1)
	assert.Equal(t, "local", out.Children[0].GetName())
	require.Len(t, out.Refused, 2)
	for _, err := range out.Refused {
		var re *Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, contract.ReasonChildRefused, re.Reason)
		var ce *ChildError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, ce.Error(), err.Error())
	}
	assert.Contains(t, out.Refused[0].Error()+out.Refused[1].Error(), `is in namespace "default", not the parent's "ns"`)
	assert.Contains(t, out.Refused[0].Error()+out.Refused[1].Error(), `"leaky" is cluster-scoped`)
}

// TestRenderNamespacesFirst: the children are in the template's order (by
// local name), namespaces first, with the engine's labels and the parent's owner
// reference where one can be carried.
func TestRenderNamespacesFirst(t *testing.T) {
	parent := testParent(tenantGVK, "acme", map[string]any{})
	out, err := Render(testTemplate(t, tenantGVK), parent, nil, Options{})
	require.NoError(t, err)
	require.Empty(t, out.Refused)
	require.Len(t, out.Children, 2)
	assert.Equal(t, []string{"Namespace", "ConfigMap"}, []string{out.Children[0].GetKind(), out.Children[1].GetKind()})
	assert.Equal(t, []string{"settings", "tenant"}, []string{out.Result.Children[0].Name, out.Result.Children[1].Name}, "the template's order")
	for _, c := range out.Children {
		assert.Equal(t, contract.ManagedByValue, c.GetLabels()[contract.LabelManagedBy])
		assert.Equal(t, string(parent.GetUID()), c.GetLabels()[contract.LabelParentUID])
		assert.Empty(t, c.GetOwnerReferences(), "outside the parent's namespace: no owner reference")
	}
}
