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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/revisions"
	"github.com/cuengine/engine/templates"
	"github.com/cuengine/engine/templates/watch"
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
		eng.Reload(ctx, watch.ReloadEvent{Set: set, Changed: []string{"quarry.cue"}})
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

var tarnGVK = schema.GroupVersionKind{Group: "tarn.cuengine.dev", Version: "v1", Kind: "Tarn"}

// tarnTemplate is a runaway when spec.quad is large (a status
// comprehension over list.Range(0, spec.quad) squared) and a ConfigMap
// that follows spec.note.
const tarnTemplate = `import "list"

parent: {apiVersion: "tarn.cuengine.dev/v1", kind: "Tarn", spec: {quad: *0 | int & >=0, note: *"" | string}}
children: note: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: parent.metadata.name
	data: note: parent.spec.note
}
status: sum: list.Sum([for i in list.Range(0, parent.spec.quad, 1) for j in list.Range(0, parent.spec.quad, 1) {i + j}])
`

// TestRunawayParentsAreBoundedAndRememberedAcrossRestart: runaway parents
// created at once beside healthy ones. Their evaluations past the timeout
// stay within three times --max-overrunning-evaluations plus the workers,
// though none of them was seen to overrun before; a healthy parent (one
// evaluated within the limits before) follows a change meanwhile; each runaway is annotated with the
// template it overran on. A new engine over the same apiserver (a restart)
// evaluates none of them (its budget starts no evaluation past the
// timeout, and counts them refused), while the healthy parents still
// follow their changes; a changed spec clears the annotation. On the code
// before, the fresh runaways were all evaluated at once and nothing was
// recorded on them.
func TestRunawayParentsAreBoundedAndRememberedAcrossRestart(t *testing.T) {
	controlPlane(t)
	const healthy, runaways, workers = 10, 6, 2
	budget := render.BudgetLimits{MaxOverrunning: 1}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tarn.cue"), []byte(tarnTemplate), 0o644))
	set, err := templates.Load(dir)
	require.NoError(t, err)
	tpl, _ := set.Lookup(tarnGVK)
	installCRD(t, tpl.CRD())
	ns := namespace(t)

	start := func() (*engine.Engine, func()) {
		ctx, cancel := context.WithCancel(context.Background())
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", MapperProvider: engine.NewRESTMapper})
		require.NoError(t, err)
		eng, err := engine.New(mgr, engine.Options{MaxConcurrentReconciles: workers, Limits: render.Limits{EvaluationTimeout: 500 * time.Millisecond}, EvaluationBudget: budget})
		require.NoError(t, err)
		eng.SetTemplates(set)
		done := make(chan error)
		go func() { done <- mgr.Start(ctx) }()
		return eng, func() { cancel(); require.NoError(t, <-done) }
	}
	noted := func(name, note string) {
		t.Helper()
		eventually(t, name+"'s ConfigMap says "+note, func(ctx context.Context) (bool, error) {
			cm, err := getConfigMap(ctx, ns, name)
			return err == nil && cm.Data["note"] == note, client.IgnoreNotFound(err)
		})
	}
	setNote := func(name, note string) {
		t.Helper()
		p := parent(tarnGVK, ns, name, nil)
		require.NoError(t, k8s.Patch(context.Background(), p, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"note":"`+note+`"}}`))))
	}
	get := func(ctx context.Context, name string) (*unstructured.Unstructured, error) {
		p := &unstructured.Unstructured{}
		p.SetGroupVersionKind(tarnGVK)
		return p, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p)
	}

	eng, stop := start()
	sampler := sampleHeap(t)
	for i := range healthy {
		require.NoError(t, k8s.Create(context.Background(), parent(tarnGVK, ns, fmt.Sprintf("healthy-%d", i), map[string]any{"note": "a"})))
	}
	for i := range healthy {
		noted(fmt.Sprintf("healthy-%d", i), "a")
	}
	// quad 150 runs past the 500 ms timeout with and without -race (100
	// ends within it without -race on an idle machine).
	for i := range runaways {
		require.NoError(t, k8s.Create(context.Background(), parent(tarnGVK, ns, fmt.Sprintf("runaway-%d", i), map[string]any{"quad": int64(150)})))
	}
	setNote("healthy-0", "b")
	noted("healthy-0", "b")
	eventuallyWithin(t, "every runaway annotated with the template it overran on", 5*time.Minute, func(ctx context.Context) (bool, error) {
		for i := range runaways {
			p, err := get(ctx, fmt.Sprintf("runaway-%d", i))
			if err != nil || p.GetAnnotations()[contract.AnnotationEvaluationOverran] != contract.EvaluationOverranValue(tpl.Hash, p.GetGeneration()) {
				return false, err
			}
		}
		return true, nil
	})
	stop()
	_, peak := sampler.peaks()
	first := eng.BudgetStats()
	t.Logf("first engine: peak evaluations past the timeout %v (cap %d, %d workers); budget %+v", peak, budget.MaxOverrunning, workers, first)
	assert.LessOrEqual(t, peak, float64(3*budget.MaxOverrunning+workers-1), "the runaways never seen before are capped too")
	assert.Positive(t, first.Refused, "some were refused over the budget meanwhile")
	settledHeap(t) // the first engine's evaluations in the background end

	eng, stop = start()
	defer stop()
	sampler = sampleHeap(t)
	setNote("healthy-1", "c")
	noted("healthy-1", "c")
	for i := range runaways {
		waitSynced(t, parent(tarnGVK, ns, fmt.Sprintf("runaway-%d", i), nil), metav1.ConditionFalse, contract.ReasonEvaluationBudgetExceeded,
			"this object's evaluation ran past --evaluation-timeout before, with this template and this generation of its spec (annotation engine.cuengine.dev/evaluation-overran); it is not evaluated again until its spec or the template changes: change its spec, or remove the annotation to retry")
	}
	_, peak = sampler.peaks()
	second := eng.BudgetStats()
	t.Logf("restarted engine: peak evaluations past the timeout %v; budget %+v", peak, second)
	assert.Zero(t, peak, "the restarted engine evaluates no runaway")
	assert.Zero(t, second.Suspects)
	assert.GreaterOrEqual(t, second.Remembered, int64(runaways), "each runaway refused without evaluating")

	require.NoError(t, k8s.Patch(context.Background(), parent(tarnGVK, ns, "runaway-0", nil), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"quad":0,"note":"tamed"}}`))))
	noted("runaway-0", "tamed")
	eventually(t, "the stale annotation removed", func(ctx context.Context) (bool, error) {
		p, err := get(ctx, "runaway-0")
		if err != nil {
			return false, err
		}
		_, annotated := p.GetAnnotations()[contract.AnnotationEvaluationOverran]
		return !annotated, nil
	})
}
