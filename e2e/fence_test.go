package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/cuengine/engine/contract"
)

// fenceWatch records every update of the Deployments and the parents of a
// namespace, and the ones that go back: a Deployment's replicas lower than
// before, or a shard label (of a Deployment or a parent) that returns to a
// shard it had left.
type fenceWatch struct {
	mu         sync.Mutex
	replicas   map[string]int32
	shards     map[string][]string // every shard label seen, in order, by "Deployment/name" or "MyKind/name"
	violations []string
	updates    int
	// hit is closed at the first Deployment seen at want replicas.
	want int32
	hit  chan struct{}
}

// first returns a channel closed at the first update of a Deployment to
// replicas.
func (w *fenceWatch) first(replicas int32) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.want, w.hit = replicas, make(chan struct{})
	return w.hit
}

func (w *fenceWatch) shard(key, shard string) {
	seen := w.shards[key]
	if len(seen) > 0 && seen[len(seen)-1] == shard {
		return
	}
	for _, s := range seen {
		if s == shard && shard != "" {
			w.violations = append(w.violations, fmt.Sprintf("%s: shard label back to %q after %v", key, shard, seen))
		}
	}
	w.shards[key] = append(seen, shard)
}

func (w *fenceWatch) deployment(d *appsv1.Deployment) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.updates++
	r := ptr.Deref(d.Spec.Replicas, 1)
	if prev, ok := w.replicas[d.Name]; ok && r < prev {
		var managers []string
		for _, m := range d.ManagedFields {
			managers = append(managers, m.Manager+"@"+m.Time.UTC().Format(time.RFC3339))
		}
		w.violations = append(w.violations, fmt.Sprintf("Deployment/%s: replicas back from %d to %d, shard %q, managers %v", d.Name, prev, r, d.Labels[contract.LabelShard], managers))
	}
	w.replicas[d.Name] = r
	if w.hit != nil && r == w.want {
		close(w.hit)
		w.hit = nil
	}
	w.shard("Deployment/"+d.Name, d.Labels[contract.LabelShard])
}

func (w *fenceWatch) parent(p *unstructured.Unstructured) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.updates++
	if s := p.GetLabels()[contract.LabelShard]; s != "" {
		w.shard("MyKind/"+p.GetName(), s)
	}
}

func (w *fenceWatch) found() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.violations...)
}

// seen is the number of updates watched so far.
func (w *fenceWatch) seen() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.updates
}

// start watches the namespace until the test ends.
func (w *fenceWatch) start(t *testing.T, ns string) {
	w.replicas, w.shards = map[string]int32{}, map[string][]string{}
	ctx, cancel := context.WithCancel(context.Background())
	deps, err := kube.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	parents, err := dyn.Resource(myKinds).Namespace(ns).Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for ev := range deps.ResultChan() {
			if d, ok := ev.Object.(*appsv1.Deployment); ok && ev.Type != watch.Deleted {
				w.deployment(d)
			}
		}
	}()
	go func() {
		defer wg.Done()
		for ev := range parents.ResultChan() {
			if p, ok := ev.Object.(*unstructured.Unstructured); ok && ev.Type != watch.Deleted {
				w.parent(p)
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		deps.Stop()
		parents.Stop()
		wg.Wait()
	})
}

// TestShardingFence: two shards s1 and s2, and a second process started
// with shard id s2, which stands by (a log line, engine_shard_standby)
// and reconciles nothing. s1, the sharder, is SIGSTOPed right after its
// parents change, and stays stopped until its parents have moved to s2
// and changed again there; on SIGCONT it writes nothing (no Deployment's
// replicas go back, no shard label returns to s1) and stops. Then s2 stops
// cleanly and the process standing by takes its shard over.
func TestShardingFence(t *testing.T) {
	const parents = 40
	const lease = 4 * time.Second
	dir := templatesDir(t, "examples/templates/mykind.cue")
	installCRDs(t, dir)
	ns := namespace(t)
	start := func(id, metrics string) *engineProc {
		p := startEngine(t, dir, "--sharding", "--shard-id", id, "--namespace", ns,
			"--leader-election-namespace", ns, "--leader-election-id", "engine-fence",
			"--leader-election-lease-duration", lease.String(), "--leader-election-renew-deadline", "3s", "--leader-election-retry-period", "500ms",
			"--metrics-bind-address", metrics, "--metrics-secure=false", "--zap-log-level", "debug")
		t.Cleanup(func() { _ = p.cmd.Process.Signal(syscall.SIGCONT) }) // before its stop
		return p
	}
	leaseHolder := func(ctx context.Context, name string) (string, error) {
		l, err := kube.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", nil
		}
		return ptr.Deref(l.Spec.HolderIdentity, ""), nil
	}

	// s1 starts alone, so it is the leader: the sharder.
	s1 := start("s1", freeAddr(t))
	eventually(t, "s1 to lead", 30*time.Second, func(ctx context.Context) (bool, error) {
		h, err := leaseHolder(ctx, "engine-fence")
		return h != "", err
	})
	s2 := start("s2", freeAddr(t))
	eventually(t, "s2 to hold its shard", 30*time.Second, func(ctx context.Context) (bool, error) {
		h, err := leaseHolder(ctx, "engine-fence-shard-s2")
		return h != "", err
	})
	twinMetrics := freeAddr(t)
	twin := start("s2", twinMetrics)
	eventually(t, "the second s2 to stand by", 30*time.Second, func(ctx context.Context) (bool, error) {
		return strings.Contains(twin.log.String(), `"msg":"another process holds this shard's lease: standing by, reconciling nothing, until it lapses or is released"`), nil
	})
	eventually(t, "engine_shard_standby of the second s2", 30*time.Second, func(ctx context.Context) (bool, error) {
		scrape, err := scrapePlainErr(twinMetrics)
		if err != nil {
			return false, nil // not serving yet
		}
		v, err := metricValue(scrape, `engine_shard_standby{shard="s2"}`)
		return v == 1, err
	})

	apply := func(names []string, replicas int) {
		var docs []string
		for _, name := range names {
			docs = append(docs, fmt.Sprintf("apiVersion: webapp.my.domain/v1\nkind: MyKind\nmetadata: {name: %s}\nspec: {deploymentName: %s, replicas: %d}\n", name, name, replicas))
		}
		kubectlApply(t, ns, strings.Join(docs, "---\n"))
	}
	var all []string
	for i := range parents {
		all = append(all, fmt.Sprintf("f%02d", i))
	}
	apply(all, 1)
	// settled waits until every parent is on one of the shards, reconciled
	// there at its generation, its Deployment labelled with its shard and
	// at its replicas; it returns the names of each shard's parents.
	settled := func(what string, shards ...string) map[string][]string {
		t.Helper()
		var held map[string][]string
		eventually(t, what, 2*time.Minute, func(ctx context.Context) (bool, error) {
			list, err := dyn.Resource(myKinds).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil || len(list.Items) != parents {
				return false, err
			}
			held = map[string][]string{}
			for _, p := range list.Items {
				shard := p.GetLabels()[contract.LabelShard]
				gen, _, _ := unstructured.NestedInt64(p.Object, "status", "observedGeneration")
				want, _, _ := unstructured.NestedInt64(p.Object, "spec", "replicas")
				d, err := kube.AppsV1().Deployments(ns).Get(ctx, p.GetName(), metav1.GetOptions{})
				if err != nil || !slices.Contains(shards, shard) || gen != p.GetGeneration() || d.Labels[contract.LabelShard] != shard || int64(ptr.Deref(d.Spec.Replicas, 1)) != want {
					return false, nil
				}
				held[shard] = append(held[shard], p.GetName())
			}
			return len(held) == len(shards), nil
		})
		return held
	}
	held := settled("the parents reconciled over s1 and s2", "s1", "s2")
	t.Logf("parents per shard: s1 %d, s2 %d", len(held["s1"]), len(held["s2"]))
	assert.NotContains(t, twin.log.String(), `"msg":"reconciled"`, "the second s2 reconciles nothing")

	w := &fenceWatch{}
	w.start(t, ns)

	// s1's parents change, and s1 stops as soon as it writes the first
	// of their Deployments, the other reconciles queued or in flight.
	working := w.first(2)
	apply(held["s1"], 2)
	select {
	case <-working:
	case <-time.After(time.Minute):
		require.Fail(t, "s1 did not start on its parents' change")
	}
	require.NoError(t, s1.cmd.Process.Signal(syscall.SIGSTOP))
	stopped := time.Now()
	// Stopped until the other replicas have seen its Leases expire: its
	// parents moved to s2; then they change again, on s2.
	eventually(t, "s1's parents moved to s2", time.Minute, func(ctx context.Context) (bool, error) {
		list, err := dyn.Resource(myKinds).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range list.Items {
			if p.GetLabels()[contract.LabelShard] != "s2" {
				return false, nil
			}
		}
		return true, nil
	})
	apply(held["s1"], 3)
	settled("s1's parents reconciled on s2 at 3 replicas", "s2")
	t.Logf("s1 stopped for %s", time.Since(stopped).Round(100*time.Millisecond))
	require.NoError(t, s1.cmd.Process.Signal(syscall.SIGCONT))

	// s1 stops by itself, or writes what it should not.
	eventually(t, "s1 to stop, having lost its lease", 30*time.Second, func(ctx context.Context) (bool, error) {
		if v := w.found(); len(v) > 0 {
			return false, fmt.Errorf("stale writes after the pause: %v", v)
		}
		select {
		case <-s1.done:
			return true, nil
		default:
			return false, nil
		}
	})
	assert.Contains(t, s1.log.String(), "shard s1 lost its lease: last renewed ")
	settled("every parent still on s2 at its replicas", "s2")
	assert.Empty(t, w.found(), "no replica count went back, no shard label returned")
	t.Logf("%d updates of Deployments and parents watched", w.seen())

	// s2 stops cleanly: its twin takes the shard over and reconciles.
	s2.stop()
	eventually(t, "the second s2 to take over", 30*time.Second, func(ctx context.Context) (bool, error) {
		return strings.Contains(twin.log.String(), `"msg":"took over the shard's lease"`), nil
	})
	apply(all[:1], 4)
	eventually(t, "a change reconciled by the second s2", time.Minute, func(ctx context.Context) (bool, error) {
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, all[0], metav1.GetOptions{})
		return err == nil && ptr.Deref(d.Spec.Replicas, 1) == 4, nil
	})
	assert.Contains(t, twin.log.String(), `"msg":"reconciled"`)
	assert.Empty(t, w.found())
}
