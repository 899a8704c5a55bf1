package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/revisions"
	"github.com/cuengine/engine/templates"
)

var quarryGVK = schema.GroupVersionKind{Group: "quarry.cuengine.dev", Version: "v1", Kind: "Quarry"}

// quarryTemplate is the probe's runaway: a status comprehension over
// list.Range(0, spec.quad) squared, and a ConfigMap whose value the edits
// change.
func quarryTemplate(edit int) string {
	return fmt.Sprintf(`import "list"

// edit %d
parent: {apiVersion: "quarry.cuengine.dev/v1", kind: "Quarry", spec: quad: *0 | int & >=0}
children: load: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: parent.metadata.name
	data: edit: "%d"
}
status: sum: list.Sum([for i in list.Range(0, parent.spec.quad, 1) for j in list.Range(0, parent.spec.quad, 1) {i + j}])
`, edit, edit)
}

// heapSampler samples the live heap (runtime/metrics) and the evaluations
// past the timeout, keeping the peaks.
type heapSampler struct {
	mu              sync.Mutex
	peakHeap        uint64
	peakOverrunning float64
	stop            chan struct{}
	done            chan struct{}
}

func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func gauge(t *testing.T, name string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	require.Fail(t, name+" is not registered")
	return 0
}

func sampleHeap(t *testing.T) *heapSampler {
	s := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			h, o := liveHeap(), gauge(t, "engine_evaluations_overrunning")
			s.mu.Lock()
			s.peakHeap, s.peakOverrunning = max(s.peakHeap, h), max(s.peakOverrunning, o)
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *heapSampler) peaks() (uint64, float64) {
	close(s.stop)
	<-s.done
	return s.peakHeap, s.peakOverrunning
}

// settledHeap is the live heap once the evaluations past the timeout have
// ended (bounded wait) and two collections ran.
func settledHeap(t *testing.T) uint64 {
	t.Helper()
	eventuallyWithin(t, "the evaluations past the timeout end", 5*time.Minute, func(context.Context) (bool, error) {
		return gauge(t, "engine_evaluations_overrunning") == 0, nil
	})
	runtime.GC()
	runtime.GC()
	return liveHeap()
}

// TestTemplateEditsWithRunawaysKeepMemoryBounded: 30 parents, 3 of them
// runaways (their evaluation outlives --evaluation-timeout by far), and ten
// edits of the template. Every edit's hold check and reconciles share the
// engine's budget: a runaway is evaluated at most once per edit, and not
// at all while --max-overrunning-evaluations are still running, so the
// evaluations in the background never exceed the cap plus the runaways'
// first ones, the healthy parents follow every edit, and the engine's heap
// returns near its level before the edits. On the code before the budget
// each edit started two more background evaluations per runaway (the hold
// check's and the reconcile's), however many were still running.
func TestTemplateEditsWithRunawaysKeepMemoryBounded(t *testing.T) {
	controlPlane(t)
	const healthy, runaways, edits = 27, 3, 10
	// quad 100: a few seconds per evaluation under -race, far past the
	// timeout of 500ms, which the healthy parents' few milliseconds are far
	// from even on a busy machine.
	quad := int64(100)
	dir := t.TempDir()
	file := filepath.Join(dir, "quarry.cue")
	require.NoError(t, os.WriteFile(file, []byte(quarryTemplate(0)), 0o644))
	set, err := templates.Load(dir)
	require.NoError(t, err)
	tpl, _ := set.Lookup(quarryGVK)
	installCRD(t, tpl.CRD())
	ns := namespace(t)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	require.NoError(t, err)
	budget := render.BudgetLimits{MaxOverrunning: 2}
	eng, err := engine.New(mgr, engine.Options{RevisionNamespace: ns, Limits: render.Limits{EvaluationTimeout: 500 * time.Millisecond}, EvaluationBudget: budget})
	require.NoError(t, err)
	eng.SetTemplates(set)
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	defer func() { cancel(); <-done }()

	for i := range healthy {
		require.NoError(t, k8s.Create(ctx, parent(quarryGVK, ns, fmt.Sprintf("healthy-%d", i), map[string]any{})))
	}
	for i := range runaways {
		require.NoError(t, k8s.Create(ctx, parent(quarryGVK, ns, fmt.Sprintf("runaway-%d", i), map[string]any{"quad": quad})))
	}
	followed := func(edit int) {
		t.Helper()
		eventuallyWithin(t, fmt.Sprintf("every healthy parent on edit %d", edit), 3*time.Minute, func(ctx context.Context) (bool, error) {
			for i := range healthy {
				cm := &corev1.ConfigMap{}
				if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("healthy-%d", i)}, cm); err != nil {
					return false, client.IgnoreNotFound(err)
				}
				if cm.Data["edit"] != fmt.Sprint(edit) {
					return false, nil
				}
			}
			return true, nil
		})
	}
	followed(0)
	before := settledHeap(t)

	sampler := sampleHeap(t)
	for edit := 1; edit <= edits; edit++ {
		require.NoError(t, os.WriteFile(file, []byte(quarryTemplate(edit)), 0o644))
		set, err := templates.Load(dir)
		require.NoError(t, err)
		eng.Reload(ctx, templates.ReloadEvent{Set: set, Changed: []string{"quarry.cue"}})
		require.NoError(t, eng.ReloadError())
		// The next edit follows as soon as this one is recorded, as an
		// author saving again and again would.
		eventually(t, fmt.Sprintf("revision %d recorded", edit+1), func(ctx context.Context) (bool, error) {
			revs, err := revisions.ListRevisions(ctx, k8s, ns, quarryGVK)
			return len(revs) > 0 && revs[len(revs)-1].Number == int64(edit+1), err
		})
	}
	followed(edits)
	peakHeap, peakOverrunning := sampler.peaks()
	after := settledHeap(t)
	mib := func(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	t.Logf("live heap: before the edits %s, peak during them %s, after them %s; peak evaluations past the timeout %v (cap %d)",
		mib(before), mib(peakHeap), mib(after), peakOverrunning, budget.MaxOverrunning)

	assert.LessOrEqual(t, peakOverrunning, float64(budget.MaxOverrunning+runaways), "the background evaluations stay within the cap (plus the runaways' first)")
	assert.Less(t, peakHeap, before+256<<20, "the heap during the edits stays within 256 MiB of its level before them")
	assert.Less(t, after, before+32<<20, "the heap after ten edits is within 32 MiB of its level before them")
	var status engine.KindStatus
	for _, k := range eng.Status() {
		if strings.HasPrefix(k.Kind, "Quarry.") {
			status = k
		}
	}
	assert.True(t, status.Running)
	assert.Empty(t, status.Error)
}
