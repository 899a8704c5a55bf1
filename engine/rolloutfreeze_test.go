package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/revisions"
	"github.com/cuengine/engine/templates"
	"github.com/cuengine/engine/templates/watch"
)

var crateGVK = schema.GroupVersionKind{Group: "crate.cuengine.dev", Version: "v1", Kind: "Crate"}

// crateTemplate is a kind whose every parent is Ready as soon as its
// ConfigMap exists, rolled out in four waves.
func crateTemplate(note string) string {
	return `parent: {apiVersion: "crate.cuengine.dev/v1", kind: "Crate", spec: mine: *"" | string}
rollout: {strategy: "Progressive", waves: [1, "10%", "50%", "100%"]}
children: label: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: parent.metadata.name
	data: {note: "` + note + `", mine: parent.spec.mine}
}
`
}

// TestProgressiveRolloutsWhileReadinessIsPolled: three progressive
// rollouts of 300 parents (ENGINE_TEST_CRATES) complete while the engine's status (what /readyz
// reads) is asked for as fast as it answers. On a165818 the first rollout
// froze the kind: a status call held the kind's lock and waited for the
// rollout's, which the step held while it listed children under the
// kind's lock. A call that does not answer within a minute fails the test
// with the goroutines of the moment.
func TestProgressiveRolloutsWhileReadinessIsPolled(t *testing.T) {
	controlPlane(t)
	parents := 300
	if n, err := strconv.Atoi(os.Getenv("ENGINE_TEST_CRATES")); err == nil && n > 0 {
		parents = n // for the figures of a larger fleet
	}
	dir := t.TempDir()
	load := func(note string) watch.ReloadEvent {
		t.Helper()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "crate.cue"), []byte(crateTemplate(note)), 0o644))
		set, err := templates.Load(dir)
		require.NoError(t, err)
		return watch.ReloadEvent{Set: set, Changed: []string{"crate.cue"}}
	}
	first := load("v1")
	crate, ok := first.Set.Lookup(crateGVK)
	require.True(t, ok)
	installCRD(t, crate.CRD())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", MapperProvider: engine.NewRESTMapper})
	require.NoError(t, err)
	ns := namespace(t)
	eng, err := engine.New(mgr, engine.Options{RevisionNamespace: ns, MaxConcurrentReconciles: 4})
	require.NoError(t, err)
	eng.SetTemplates(first.Set)
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	defer func() { cancel(); <-done }()

	for i := range parents {
		require.NoError(t, k8s.Create(ctx, parent(crateGVK, ns, fmt.Sprintf("c%03d", i), map[string]any{})))
	}
	onRevision := func(n int64) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(crateGVK.GroupVersion().WithKind("CrateList"))
			if err := k8s.List(ctx, list); err != nil {
				return false, err
			}
			on := 0
			for i := range list.Items {
				p := &list.Items[i]
				if number, _ := contract.ParentRevision(p); number == n && p.GetNamespace() == ns {
					if c := findReady(p); c != nil && c.Status == metav1.ConditionTrue {
						on++
					}
				}
			}
			return on == parents, nil
		}
	}
	eventuallyWithin(t, "every crate Ready on revision 1", 10*time.Minute, onRevision(1))

	// One parent's spec change, timed until its child shows it: with no
	// rollout, and during the hold check of the first one (below).
	edits := 0
	specChange := func() time.Duration {
		t.Helper()
		edits++
		want := fmt.Sprintf("edit-%d", edits)
		p := parent(crateGVK, ns, "c000", nil)
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(p), p))
		require.NoError(t, unstructured.SetNestedField(p.Object, want, "spec", "mine"))
		start := time.Now()
		require.NoError(t, k8s.Update(ctx, p))
		eventuallyWithin(t, "the spec change in the child", 5*time.Minute, func(ctx context.Context) (bool, error) {
			cm := &corev1.ConfigMap{}
			err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c000"}, cm)
			return err == nil && cm.Data["mine"] == want, err
		})
		return time.Since(start)
	}
	t.Logf("a spec change reached its child in %v with no rollout", specChange().Round(time.Millisecond))

	// Pollers: as fast as the status answers, the slowest call kept.
	var (
		mu      sync.Mutex
		slowest time.Duration
		calls   int
		frozen  string
	)
	stop := make(chan struct{})
	var pollers sync.WaitGroup
	for range 2 {
		pollers.Add(1)
		go func() {
			defer pollers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				answered := make(chan struct{})
				go func() { eng.Status(); _ = eng.ReloadError(); close(answered) }()
				select {
				case <-answered:
				case <-time.After(time.Minute):
					var dump bytes.Buffer
					_ = pprof.Lookup("goroutine").WriteTo(&dump, 1)
					mu.Lock()
					frozen = dump.String()
					mu.Unlock()
					return
				}
				mu.Lock()
				calls++
				slowest = max(slowest, time.Since(start))
				mu.Unlock()
			}
		}()
	}

	for i, note := range []string{"v2", "v3", "v4"} {
		number := int64(i + 2)
		began := time.Now()
		eng.Reload(ctx, load(note))
		require.NoError(t, eng.ReloadError())
		if i == 0 {
			t.Logf("a spec change reached its child in %v during the hold check of %d parents", specChange().Round(time.Millisecond), parents)
		}
		ok := waitFor(5*time.Minute, func(ctx context.Context) (bool, error) {
			mu.Lock()
			stuck := frozen != ""
			mu.Unlock()
			if stuck {
				return true, nil // reported below
			}
			revs, err := revisions.ListRevisions(ctx, k8s, ns, crateGVK)
			if err != nil || len(revs) == 0 || revs[len(revs)-1].Number != number || revs[len(revs)-1].Phase != revisions.PhaseComplete {
				return false, err
			}
			return onRevision(number)(ctx)
		})
		mu.Lock()
		dump := frozen
		mu.Unlock()
		require.Empty(t, dump, "a status call did not answer within a minute during rollout %d; the goroutines:\n%s", number, dump)
		require.True(t, ok, "revision %d complete, every crate Ready on it", number)
		t.Logf("rollout of revision %d: %v", number, time.Since(began).Round(time.Millisecond))
	}
	close(stop)
	pollers.Wait()
	assert.Empty(t, frozen)
	assert.Positive(t, calls)
	t.Logf("status asked %d times during the three rollouts; the slowest answer took %v", calls, slowest)
}

// waitFor polls cond until it holds (true) or timeout passes (false).
func waitFor(timeout time.Duration, cond func(ctx context.Context) (bool, error)) bool {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		if ok, _ := cond(ctx); ok {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func findReady(p *unstructured.Unstructured) *metav1.Condition {
	raw, _, _ := unstructured.NestedSlice(p.Object, "status", "conditions")
	for _, r := range raw {
		m, _ := r.(map[string]any)
		if m["type"] == contract.ConditionReady {
			return &metav1.Condition{Type: contract.ConditionReady, Status: metav1.ConditionStatus(fmt.Sprint(m["status"]))}
		}
	}
	return nil
}
