package rollout

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/cuengine/engine/revisions"
	"github.com/cuengine/engine/rollout/analysis"
	"github.com/cuengine/engine/templates"
	"github.com/cuengine/engine/templates/policy"
)

// verdicts is an Analyzer whose every check returns the verdict set last.
type verdicts struct {
	mu      sync.Mutex
	verdict analysis.Verdict
	calls   []analysis.Vars
}

func (v *verdicts) set(verdict analysis.Verdict) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.verdict = verdict
}

func (v *verdicts) Evaluate(_ context.Context, c policy.AnalysisCheck, vars analysis.Vars) analysis.Result {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.calls = append(v.calls, vars)
	r := analysis.Result{Check: c.Name, Verdict: v.verdict, Value: math.NaN(), At: time.Now()}
	switch v.verdict {
	case analysis.Passed:
		r.Value, r.Message = 0.01, "analysis "+c.Name+" passed: q is 0.01, the condition is "+c.Condition.String()
	case analysis.Failed:
		r.Value, r.Message = 0.3, "analysis "+c.Name+" failed: q is 0.3, the condition is "+c.Condition.String()
	default:
		r.Message = "analysis " + c.Name + " held: Prometheus at http://p did not answer the query q: connection refused"
	}
	return r
}

// soakRollout is a Rollout whose target, revision 2, is in its first wave
// with policy, revision 1 complete; stored in a fake client.
func soakRollout(t *testing.T, policy policy.Rollout) (*Rollout, *revisions.Store) {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, appsv1.AddToScheme(scheme))
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	gvk := schema.GroupVersionKind{Group: "test.cuengine.dev", Version: "v1", Kind: "Test"}
	store := &revisions.Store{Client: c, Reader: c, Namespace: "default", GVK: gvk}
	ro := New(&fakeKind{}, gvk, store, 10, Hold{})
	for i, phase := range []revisions.Phase{revisions.PhaseComplete, revisions.PhaseProgressing} {
		hash := []string{"h1", "h2"}[i]
		rev := revisions.Revision{Name: revisions.RevisionName(gvk, hash), Number: int64(i + 1), Hash: hash, Phase: phase, HeldDeletes: -1}
		require.NoError(t, c.Create(context.Background(), revisions.ObjectOf("default", gvk, rev, nil)))
		ro.revs[hash] = &loadedRevision{Revision: rev, tpl: &templates.Template{Path: hash, Rollout: policy}}
		ro.target = ro.revs[hash]
	}
	ro.restable()
	return ro, store
}

func stored(t *testing.T, store *revisions.Store) revisions.Revision {
	t.Helper()
	revs, err := revisions.ListRevisions(context.Background(), store.Reader, "default", store.GVK)
	require.NoError(t, err)
	return revs[len(revs)-1]
}

// TestSoakGate: the soak's clock is recorded when it starts and kept
// across a restart; the wave passes once the soak is over and its checks
// pass; held checks hold it past the soak; a failed check rolls back,
// naming it; no analyzer holds.
func TestSoakGate(t *testing.T) {
	ctx := context.Background()
	errors := policy.AnalysisCheck{Name: "errors", Query: "q", Condition: policy.Condition{Op: "<", Bound: 0.05}}
	policy := policy.Rollout{Strategy: policy.RolloutProgressive, Waves: []policy.Wave{{Count: 1}, {Percent: 100}}, Soak: 10 * time.Second, Analysis: []policy.AnalysisCheck{errors}}
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

	t.Run("no analyzer holds", func(t *testing.T) {
		ro, store := soakRollout(t, policy)
		out, err := ro.soakGate(ctx, nil, t0.Add(time.Hour))
		require.NoError(t, err)
		assert.False(t, out.passed)
		assert.Equal(t, "soaking 10s since 2026-12-02T11:00:00Z, until 2026-12-02T11:00:10Z; held: the template declares analysis (errors) and the engine has no Prometheus to run it (engine run --prometheus-url)", out.note)
		assert.True(t, t0.Add(time.Hour).Equal(stored(t, store).SoakSince), "the clock is recorded")
		out, err = ro.soakGate(ctx, nil, t0.Add(time.Hour+time.Minute))
		require.NoError(t, err)
		assert.False(t, out.passed, "never promotes")
	})

	t.Run("held, then passed", func(t *testing.T) {
		ro, store := soakRollout(t, policy)
		a := &verdicts{verdict: analysis.Held}
		ro.SetAnalyzer(a)
		// A restarted leader: the clock recorded by the previous one.
		ro.target.SoakSince = t0
		out, err := ro.soakGate(ctx, nil, t0.Add(5*time.Second))
		require.NoError(t, err)
		assert.False(t, out.passed)
		assert.True(t, t0.Equal(ro.target.SoakSince), "the clock resumes")
		assert.NotContains(t, out.note, "the wave waits", "within the soak")
		out, err = ro.soakGate(ctx, nil, t0.Add(11*time.Second))
		require.NoError(t, err)
		assert.False(t, out.passed, "held past the soak")
		assert.Equal(t, "soaked 10s since 2026-12-02T10:00:00Z; held: analysis errors held: Prometheus at http://p did not answer the query q: connection refused (the wave waits: no data is not success)", out.note)
		assert.Equal(t, []string{"analysis errors held: Prometheus at http://p did not answer the query q: connection refused"}, stored(t, store).Analysis)

		a.set(analysis.Passed)
		out, err = ro.soakGate(ctx, nil, t0.Add(13*time.Second)) // the checks run every 2s
		require.NoError(t, err)
		assert.True(t, out.passed)
		assert.Equal(t, analysis.Vars{Kind: "Test.test.cuengine.dev", Revision: "2", Wave: 1}, a.calls[len(a.calls)-1])
	})

	t.Run("failed rolls back", func(t *testing.T) {
		ro, store := soakRollout(t, policy)
		ro.SetAnalyzer(&verdicts{verdict: analysis.Failed})
		out, err := ro.soakGate(ctx, nil, t0)
		require.NoError(t, err)
		assert.True(t, out.rolledBack)
		rev := stored(t, store)
		assert.Equal(t, revisions.PhaseRolledBack, rev.Phase)
		assert.Equal(t, "wave 1 of 2: analysis errors failed: q is 0.3, the condition is < 0.05", rev.Message)
		assert.True(t, rev.SoakSince.IsZero())
	})

	t.Run("a soak without analysis", func(t *testing.T) {
		p := policy
		p.Analysis = nil
		ro, _ := soakRollout(t, p)
		out, err := ro.soakGate(ctx, nil, t0)
		require.NoError(t, err)
		assert.False(t, out.passed)
		out, err = ro.soakGate(ctx, nil, t0.Add(10*time.Second))
		require.NoError(t, err)
		assert.True(t, out.passed)
	})
}

// TestSoakRegressions: during a soak, a parent reconciled on the target
// and not healthy is a regression, said so in place of its other
// failure; one whose generation is not reconciled yet, or that was
// failing before, is not.
func TestSoakRegressions(t *testing.T) {
	down := rolloutParent("down", "h2", metav1.ConditionTrue, metav1.ConditionFalse)
	stale := rolloutParent("stale", "h2", metav1.ConditionTrue, metav1.ConditionFalse)
	stale.SetGeneration(2)
	before := rolloutParent("before", "h2", metav1.ConditionTrue, metav1.ConditionFalse)
	ok := rolloutParent("ok", "h2", metav1.ConditionTrue, metav1.ConditionTrue)
	moves := map[types.UID]move{before.GetUID(): {failingBefore: true}}
	got := soakRegressions([]*unstructured.Unstructured{down, stale, before, ok}, moves, "h2",
		[]string{"ns/down: not Ready 5m0s after its update (progressDeadline): Ready=False", "ns/other: Synced=False"})
	assert.Equal(t, []string{"ns/down: turned unhealthy during the soak: Ready=False R: ready message", "ns/other: Synced=False"}, got)
}
