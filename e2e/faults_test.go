package e2e

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/cuengine/engine/internal/gcsemulator"
)

var storefronts = schema.GroupVersionResource{Group: "apps.cuengine.dev", Version: "v1", Resource: "storefronts"}

// faultScale scales the fault suite's fleet by ENGINE_FAULTS_SCALE, for a
// quicker run while working on it (0.1: a tenth). Without it, the full
// size, which `make test` runs and docs/operations.md's figures come from.
func faultScale(n int) int {
	s, err := strconv.ParseFloat(os.Getenv("ENGINE_FAULTS_SCALE"), 64)
	if err != nil || s <= 0 {
		s = 1
	}
	return max(1, int(float64(n)*s))
}

// TestFaults puts the engine through a bad day on the full local cluster,
// with a fleet of MyKinds, Storefronts and Gcs (and their buckets in the
// emulator): the apiserver killed, etcd killed, every connection between
// the engine and the apiserver cut, the engine killed while parents are
// being created, the GCS emulator gone while buckets are being created.
// After each fault every parent converges, no child or bucket is lost or
// duplicated, no foreign object is touched, the engine never exits on its
// own, and /readyz says what is wrong while it is wrong. The time to
// converge after each recovery is logged ("fault ...") for
// docs/operations.md.
func TestFaults(t *testing.T) {
	w := newFaultWorld(t)
	w.createFleet(faultScale(300), faultScale(20), faultScale(20))
	w.converged("the fleet", 5*time.Minute)

	// Outages between the engine and the apiserver: work in flight when
	// they strike, /readyz saying so while they last.
	for _, o := range []struct {
		name         string
		down         time.Duration
		fail, repair func(t *testing.T)
	}{
		{"kube-apiserver killed for 20s", 20 * time.Second,
			func(t *testing.T) { require.NoError(t, cluster.Kill("kube-apiserver")) },
			func(t *testing.T) { require.NoError(t, cluster.Revive(context.Background(), "kube-apiserver")) }},
		{"etcd killed for 20s", 20 * time.Second,
			func(t *testing.T) { require.NoError(t, cluster.Kill("etcd")) },
			func(t *testing.T) { require.NoError(t, cluster.Revive(context.Background(), "etcd")) }},
		{"connections cut for 30s", 30 * time.Second,
			func(*testing.T) { w.proxy.cut() },
			func(*testing.T) { w.proxy.restore() }},
	} {
		t.Run(o.name, func(t *testing.T) {
			w.t = t
			w.rescale(faultScale(30))
			o.fail(t)
			w.readyzSays("the apiserver is unreachable")
			w.down(o.down)
			o.repair(t)
			w.converged("after: "+o.name, 5*time.Minute)
		})
	}
	t.Run("engine killed while parents are created", func(t *testing.T) {
		w.t = t
		n := faultScale(500)
		created := w.createMyKindsAsync("burst", n)
		w.eventuallyCreated(created, int64(n/3))
		w.engine.kill()
		w.startEngine()
		w.converged("after the engine restarts", 8*time.Minute)
	})
	t.Run("GCS emulator gone for 30s during bucket creates", func(t *testing.T) {
		w.t = t
		n := faultScale(50)
		created := w.createGcsAsync("late", n)
		w.eventuallyCreated(created, int64(n/5))
		w.stopEmulator()
		w.down(30 * time.Second)
		w.startEmulator()
		w.converged("after the emulator is back", 8*time.Minute)
	})
	w.t = t
	w.teardown() // while the engine runs: it releases the finalizers
}

// faultWorld is the fleet under test and what it runs on.
type faultWorld struct {
	t          *testing.T // the running subtest
	root       *testing.T // TestFaults: what lives across the subtests
	ns         string
	dir        string // the templates
	engine     *engineProc
	kubeconfig string // the engine's, through the proxy
	proxy      *cutProxy
	emu        *gcsemulator.Emulator
	emuAddr    string
	emuDir     string
	foreign    map[string]string // kind/name -> resource version
	replicas   int64             // what rescale last set
	failures   []string          // why a wait for convergence failed
}

func newFaultWorld(t *testing.T) *faultWorld {
	w := &faultWorld{t: t, root: t, emuDir: t.TempDir(), emuAddr: freeAddr(t)}
	// Registered first, so it runs last: after the engine's log tail, at
	// the end of the output, where a CI summary shows it.
	t.Cleanup(func() {
		for _, f := range w.failures {
			t.Log(f)
		}
	})
	w.dir = templatesDir(t, "examples/templates/mykind.cue", "examples/templates/gcs.cue")
	require.NoError(t, os.CopyFS(filepath.Join(w.dir, "storefront"), os.DirFS(filepath.Join(repo, "examples/templates/storefront"))))
	installCRDs(t, w.dir)
	w.startEmulator()
	t.Cleanup(w.stopEmulator)
	w.proxy = startCutProxy(t, cluster.Config.Host)
	w.kubeconfig = w.proxyKubeconfig()
	t.Setenv("STORAGE_EMULATOR_HOST", w.emuAddr)
	w.startEngine()
	w.ns = namespace(t)
	kubectlApply(t, w.ns, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: foreign, labels: {app: foreign}}
spec:
  replicas: 1
  selector: {matchLabels: {app: foreign}}
  template:
    metadata: {labels: {app: foreign}}
    spec: {containers: [{name: c, image: nginx}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: foreign}
data: {owner: someone else}
`)
	w.foreign = w.foreignVersions()
	return w
}

// teardown deletes the fleet and waits until it is gone, so that the
// engines of later tests, which watch every namespace, find none of it.
// The parents that hold the engine's finalizer (Storefronts and Gcs) go
// first: a Storefront's deletion waits on its Deployment's foreground
// deletion, which would otherwise queue in the garbage collector behind the
// Deployments, ReplicaSets and Pods of the MyKinds (800 at full size:
// about three minutes on two shared cores, near the wait's limit of
// five). MyKinds hold no finalizer and go at once.
func (w *faultWorld) teardown() {
	start := time.Now()
	w.deleteAll("the Storefronts and Gcs", storefronts, gcsKind)
	w.deleteAll("the MyKinds", myKinds)
	w.t.Logf("fault: the fleet deleted in %.1fs", time.Since(start).Seconds())
}

// deleteAll deletes every parent of the kinds in the fleet's namespace and
// waits until they are gone, saying every 30s what is left.
func (w *faultWorld) deleteAll(what string, kinds ...schema.GroupVersionResource) {
	ctx := context.Background()
	for _, gvr := range kinds {
		err := dyn.Resource(gvr).Namespace(w.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		require.NoError(w.t, err, "deleting the fleet's %s", gvr.Resource)
	}
	start := time.Now()
	logged := start
	eventually(w.t, what+" deleted", 5*time.Minute, func(ctx context.Context) (bool, error) {
		var left []unstructured.Unstructured
		for _, gvr := range kinds {
			list, err := dyn.Resource(gvr).Namespace(w.ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			left = append(left, list.Items...)
		}
		if len(left) == 0 {
			return true, nil
		}
		err := fmt.Errorf("%d left, first: %s %s (Ready: %s)", len(left), left[0].GetKind(), left[0].GetName(), conditionsOf(&left[0])["Ready"])
		if time.Since(logged) > 30*time.Second {
			w.t.Logf("fault: deleting %s, %.0fs: %v", what, time.Since(start).Seconds(), err)
			logged = time.Now()
		}
		return false, err
	})
}

func (w *faultWorld) startEngine() {
	w.engine = launchEngine(w.t, w.root, w.dir, "--kubeconfig", w.kubeconfig)
}

func (w *faultWorld) startEmulator() {
	emu, err := gcsemulator.Start(gcsemulator.Options{Addr: w.emuAddr, Dir: w.emuDir})
	require.NoError(w.t, err)
	w.emu = emu
}

func (w *faultWorld) stopEmulator() {
	if w.emu != nil {
		_ = w.emu.Stop()
		w.emu = nil
	}
}

// proxyKubeconfig is the cluster's kubeconfig with the apiserver behind the
// proxy.
func (w *faultWorld) proxyKubeconfig() string {
	cfg, err := clientcmd.LoadFromFile(cluster.Kubeconfig)
	require.NoError(w.t, err)
	for _, c := range cfg.Clusters {
		c.Server = "https://" + w.proxy.addr()
	}
	path := filepath.Join(w.t.TempDir(), "kubeconfig")
	require.NoError(w.t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// down is the length of an outage: the fault lasts that long by design.
func (w *faultWorld) down(d time.Duration) {
	w.t.Logf("fault: down for %s", d)
	time.Sleep(d)
}

func (w *faultWorld) createFleet(mykinds, storefronts, buckets int) {
	var manifest strings.Builder
	for i := range mykinds {
		fmt.Fprintf(&manifest, "---\napiVersion: webapp.my.domain/v1\nkind: MyKind\nmetadata: {name: mk-%d}\nspec: {deploymentName: mk-%d}\n", i, i)
	}
	for i := range storefronts {
		fmt.Fprintf(&manifest, "---\napiVersion: apps.cuengine.dev/v1\nkind: Storefront\nmetadata: {name: shop-%d}\nspec: {projectID: p, bucketName: shop-%d}\n", i, i)
	}
	for i := range buckets {
		fmt.Fprintf(&manifest, "---\napiVersion: storage.matsumo.dev/v1\nkind: Gcs\nmetadata: {name: gcs-%d}\nspec: {projectID: p, bucketName: data-%d, forceDestroy: true}\n", i, i)
	}
	kubectlApply(w.t, w.ns, manifest.String())
}

// rescale changes the replicas of n MyKinds: work in flight when the fault
// strikes.
func (w *faultWorld) rescale(n int) {
	w.replicas = w.replicas%3 + 2
	patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, w.replicas))
	for i := range n {
		_, err := dyn.Resource(myKinds).Namespace(w.ns).Patch(context.Background(), fmt.Sprintf("mk-%d", i), types.MergePatchType, patch, metav1.PatchOptions{})
		require.NoError(w.t, err)
	}
}

// createMyKindsAsync creates n MyKinds, 16 at a time, in the background;
// the counter says how many are created so far.
func (w *faultWorld) createMyKindsAsync(prefix string, n int) *atomic.Int64 {
	return w.createAsync(n, func(ctx context.Context, i int) error {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "webapp.my.domain/v1", "kind": "MyKind",
			"metadata": map[string]any{"name": fmt.Sprintf("%s-%d", prefix, i)},
			"spec":     map[string]any{"deploymentName": fmt.Sprintf("%s-%d", prefix, i)},
		}}
		_, err := dyn.Resource(myKinds).Namespace(w.ns).Create(ctx, obj, metav1.CreateOptions{})
		return err
	})
}

func (w *faultWorld) createGcsAsync(prefix string, n int) *atomic.Int64 {
	return w.createAsync(n, func(ctx context.Context, i int) error {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "storage.matsumo.dev/v1", "kind": "Gcs",
			"metadata": map[string]any{"name": fmt.Sprintf("%s-%d", prefix, i)},
			"spec":     map[string]any{"projectID": "p", "bucketName": fmt.Sprintf("%s-%d", prefix, i), "forceDestroy": true},
		}}
		_, err := dyn.Resource(gcsKind).Namespace(w.ns).Create(ctx, obj, metav1.CreateOptions{})
		return err
	})
}

func (w *faultWorld) createAsync(n int, create func(context.Context, int) error) *atomic.Int64 {
	t := w.t
	var created atomic.Int64
	work := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range work {
				if err := createRetrying(t, func() error { return create(context.Background(), i) }); err != nil {
					t.Errorf("creating parent %d: %v", i, err)
					continue
				}
				created.Add(1)
			}
		})
	}
	go func() {
		for i := range n {
			work <- i
		}
		close(work)
	}()
	w.t.Cleanup(wg.Wait)
	return &created
}

// createRetrying creates a parent as any client would on a loaded
// machine: an error is retried (and logged) for a while, and an
// AlreadyExists after a retry means the earlier attempt went through
// though its reply was lost.
func createRetrying(t *testing.T, create func() error) error {
	attempts := 0
	err := retry.OnError(wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Steps: 6}, func(err error) bool {
		if apierrors.IsAlreadyExists(err) {
			return false
		}
		t.Logf("fault: creating a parent: %v; retrying", err)
		return true
	}, func() error {
		attempts++
		return create()
	})
	if apierrors.IsAlreadyExists(err) && attempts > 1 {
		return nil
	}
	return err
}

func (w *faultWorld) eventuallyCreated(created *atomic.Int64, n int64) {
	eventually(w.t, fmt.Sprintf("%d parents created", n), time.Minute, func(context.Context) (bool, error) {
		return created.Load() >= n, nil
	})
}

// readyzSays waits until the engine's /readyz fails with the given text.
func (w *faultWorld) readyzSays(text string) {
	eventually(w.t, "/readyz to say "+text, 30*time.Second, func(context.Context) (bool, error) {
		code, body := readyz(w.engine.probe)
		return code == http.StatusInternalServerError && strings.Contains(body, text), nil
	})
}

// converged waits until every parent is reconciled, Synced and Ready, with
// exactly its children and buckets, the foreign objects untouched and the
// engine still running, and logs how long that took. The engine's part
// (everything but readiness) must be done within timeout. Readiness also
// waits on the cluster's own controllers (the Deployment and ReplicaSet
// controllers, the scheduler, kwok), which a fault delays too: it gets
// timeout again, and a readiness later than timeout is logged with the
// Deployments' state and the components' errors. When the wait fails, it
// says what was left, grouped, again at the end of the suite's output.
func (w *faultWorld) converged(what string, timeout time.Duration) {
	start := time.Now()
	logged := start
	var synced time.Duration // when only readiness was left
	var last []string
	var lastErr error
	late := false
	ctx, cancel := context.WithTimeout(context.Background(), 2*timeout)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case <-w.engine.done:
			return false, fmt.Errorf("the engine exited: %s", tail(w.engine.log.String(), 20))
		default:
		}
		problems, err := w.problems(ctx)
		if err != nil {
			if ctx.Err() == nil {
				lastErr = err
			}
			return false, nil
		}
		lastErr, last = nil, problems
		if synced == 0 && !slices.ContainsFunc(problems, func(p string) bool { return !strings.Contains(p, notReady) }) {
			synced = time.Since(start)
		}
		switch elapsed := time.Since(start); {
		case len(problems) == 0:
			return true, nil
		case synced == 0 && elapsed > timeout:
			return false, fmt.Errorf("the engine's part is not done after %s", timeout)
		case synced > 0 && elapsed > timeout && !late:
			late = true
			w.t.Logf("fault: converging %s: the engine's part done in %.1fs, but %d parents not Ready after %s:\n%s", what, synced.Seconds(), len(problems), timeout,
				summarizeProblems(problems, nil)+w.deploymentsSeen()+componentErrors())
		}
		if time.Since(logged) > 30*time.Second {
			w.t.Logf("fault: converging %s, %.0fs: %d problems, first: %s", what, time.Since(start).Seconds(), len(problems), problems[0])
			logged = time.Now()
		}
		return false, nil
	})
	if wait.Interrupted(err) {
		err = fmt.Errorf("not every parent Ready after %s", 2*timeout)
	}
	if err != nil {
		msg := fmt.Sprintf("fault: the fleet did not converge %s: %v\n%s", what, err, summarizeProblems(last, lastErr)) + w.deploymentsSeen() + componentErrors()
		w.failures = append(w.failures, msg)
		w.t.Fatal(msg)
	}
	w.t.Logf("fault: the fleet converged %s: the engine's work done in %.1fs, every parent Ready in %.1fs", what, synced.Seconds(), time.Since(start).Seconds())
}

// deploymentsSeen says how far the apiserver's Deployments of the fleet
// are rolled out, to tell a parent the engine has not caught up with from
// one whose Deployment the cluster has not rolled out.
func (w *faultWorld) deploymentsSeen() string {
	list, err := kube.AppsV1().Deployments(w.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=engine"})
	if err != nil {
		return fmt.Sprintf("\n  the Deployments: %v", err)
	}
	var current, available int
	var late, unavailable []string
	for _, d := range list.Items {
		if d.Status.ObservedGeneration != d.Generation {
			late = append(late, d.Name)
			continue
		}
		current++
		if d.Spec.Replicas != nil && d.Status.AvailableReplicas == *d.Spec.Replicas && d.Status.UpdatedReplicas == *d.Spec.Replicas {
			available++
		} else if len(unavailable) < 3 {
			unavailable = append(unavailable, fmt.Sprintf("%s: replicas %d, status %+v", d.Name, ptr.Deref(d.Spec.Replicas, 1), d.Status))
		}
	}
	return fmt.Sprintf("\n  the apiserver's %d Deployments: %d observed by the Deployment controller (not: %s), %d of them rolled out and available; not available: %s",
		len(list.Items), current, strings.Join(late[:min(5, len(late))], ", "), available, strings.Join(unavailable, "; "))
}

// componentErrors quotes the last error lines of the cluster's components'
// logs: what the cluster's own controllers (and the apiserver) could not do.
func componentErrors() string {
	var b strings.Builder
	for _, name := range []string{"kube-controller-manager", "kwok", "kube-scheduler", "kube-apiserver"} {
		data, err := os.ReadFile(filepath.Join(cluster.Dir, name+".log"))
		if err != nil {
			fmt.Fprintf(&b, "\n  %s's log: %v", name, err)
			continue
		}
		var errs []string
		for line := range strings.Lines(string(data)) {
			if strings.HasPrefix(line, "E") || strings.Contains(line, "level=ERROR") {
				errs = append(errs, strings.TrimSpace(line))
			}
		}
		fmt.Fprintf(&b, "\n  %s: %d error lines, the last ones:", name, len(errs))
		for _, l := range errs[max(0, len(errs)-5):] {
			fmt.Fprintf(&b, "\n    %.400s", l)
		}
	}
	return b.String()
}

// summarizeProblems groups problems by what they say with the parent's name
// left out (<name>), the largest group first, with up to five names each.
func summarizeProblems(problems []string, err error) string {
	var b strings.Builder
	if err != nil {
		fmt.Fprintf(&b, "  the last check failed: %v\n", err)
	}
	groups := map[string][]string{}
	for _, p := range problems {
		name, rest, _ := strings.Cut(p, ": ") // "MyKind mk-1", "waiting for Deployment mk-1"
		if _, short, ok := strings.Cut(name, " "); ok {
			rest = strings.ReplaceAll(rest, short, "<name>")
		}
		groups[rest] = append(groups[rest], name)
	}
	keys := slices.Collect(maps.Keys(groups))
	slices.SortFunc(keys, func(a, b string) int { return len(groups[b]) - len(groups[a]) })
	fmt.Fprintf(&b, "  %d problems in the last check", len(problems))
	for _, k := range keys {
		names := groups[k]
		fmt.Fprintf(&b, "\n  %d x %s (%s", len(names), k, strings.Join(names[:min(5, len(names))], ", "))
		if len(names) > 5 {
			b.WriteString(", ...")
		}
		b.WriteString(")")
	}
	return b.String()
}

// problems lists what keeps the fleet from being converged.
func (w *faultWorld) problems(ctx context.Context) ([]string, error) {
	var out []string
	deployments, err := kube.AppsV1().Deployments(w.ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=engine"})
	if err != nil {
		return nil, err
	}
	childrenOf := map[string]int{}
	for _, d := range deployments.Items {
		childrenOf[d.Labels["engine.cuengine.dev/parent-uid"]]++
	}
	buckets, err := w.buckets(ctx)
	if err != nil {
		return nil, err
	}
	for _, gvr := range []schema.GroupVersionResource{myKinds, storefronts, gcsKind} {
		list, err := dyn.Resource(gvr).Namespace(w.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, p := range list.Items {
			if msg := parentProblem(&p); msg != "" {
				out = append(out, fmt.Sprintf("%s %s: %s", p.GetKind(), p.GetName(), msg))
				continue
			}
			uid := string(p.GetUID())
			wantDeployments, wantBuckets := 1, 0
			switch gvr {
			case storefronts:
				wantBuckets = 1
			case gcsKind:
				wantDeployments, wantBuckets = 0, 1
			}
			if childrenOf[uid] != wantDeployments {
				out = append(out, fmt.Sprintf("%s %s: %d Deployments, want %d", p.GetKind(), p.GetName(), childrenOf[uid], wantDeployments))
			}
			if buckets[uid] != wantBuckets {
				out = append(out, fmt.Sprintf("%s %s: %d buckets, want %d", p.GetKind(), p.GetName(), buckets[uid], wantBuckets))
			}
		}
	}
	if n := buckets[""]; n > 0 {
		out = append(out, fmt.Sprintf("%d buckets in the emulator without an owner: leaked", n))
	}
	if got := w.foreignVersions(); fmt.Sprint(got) != fmt.Sprint(w.foreign) {
		out = append(out, fmt.Sprintf("foreign objects changed: %v, were %v", got, w.foreign))
	}
	return out, nil
}

// parentProblem says why a parent is not converged, "" when it is.
func parentProblem(p *unstructured.Unstructured) string {
	gen, _, _ := unstructured.NestedInt64(p.Object, "status", "observedGeneration")
	if gen != p.GetGeneration() {
		return fmt.Sprintf("observedGeneration %d of %d", gen, p.GetGeneration())
	}
	status := conditionsOf(p)
	if !strings.HasPrefix(status["Synced"], "True ") {
		return "Synced is " + status["Synced"]
	}
	if !strings.HasPrefix(status["Ready"], "True ") {
		return notReady + status["Ready"]
	}
	return ""
}

// conditionsOf returns a parent's conditions by type, each as
// "status reason: message".
func conditionsOf(p *unstructured.Unstructured) map[string]string {
	conds, _, _ := unstructured.NestedSlice(p.Object, "status", "conditions")
	out := map[string]string{}
	for _, c := range conds {
		m, _ := c.(map[string]any)
		out[fmt.Sprint(m["type"])] = fmt.Sprintf("%v %v: %v", m["status"], m["reason"], m["message"])
	}
	return out
}

// notReady starts the problem of a parent whose only problem is readiness:
// what is left to the cluster's own controllers (the Deployment
// controller, the kubelet) once the engine has done its part.
const notReady = "Ready is "

// buckets counts the emulator's buckets per owner UID ("" for none).
func (w *faultWorld) buckets(ctx context.Context) (map[string]int, error) {
	if w.emu == nil {
		return nil, fmt.Errorf("the emulator is down")
	}
	all, err := w.emu.Buckets(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, b := range all {
		out[b.Labels["engine-owner-uid"]]++
	}
	return out, nil
}

func (w *faultWorld) foreignVersions() map[string]string {
	ctx := context.Background()
	d, err := kube.AppsV1().Deployments(w.ns).Get(ctx, "foreign", metav1.GetOptions{})
	require.NoError(w.t, err)
	cm, err := kube.CoreV1().ConfigMaps(w.ns).Get(ctx, "foreign", metav1.GetOptions{})
	require.NoError(w.t, err)
	// The Deployment's status moves with its pods; its spec and metadata
	// are what the engine must not touch.
	return map[string]string{"deployment generation": strconv.FormatInt(d.Generation, 10), "deployment labels": fmt.Sprint(d.Labels), "configmap": cm.ResourceVersion}
}

// cutProxy forwards TCP connections to the apiserver and can cut them all:
// open ones are closed, new ones are accepted and left hanging, until
// restore.
type cutProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cutAt bool
	conns map[net.Conn]bool
}

func startCutProxy(t *testing.T, server string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &cutProxy{ln: ln, target: strings.TrimPrefix(server, "https://"), conns: map[net.Conn]bool{}}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.closeAll() })
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.conns[c] = true
		cut := p.cutAt
		p.mu.Unlock()
		if cut {
			continue // left hanging until restore closes it
		}
		go p.forward(c)
	}
}

func (p *cutProxy) forward(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[up] = true
	p.mu.Unlock()
	go func() { _, _ = io.Copy(up, c); up.Close() }()
	_, _ = io.Copy(c, up)
	c.Close()
}

// cut closes every connection and leaves new ones hanging.
func (p *cutProxy) cut() {
	p.mu.Lock()
	p.cutAt = true
	p.mu.Unlock()
	p.closeAll()
}

// restore forwards again; the connections left hanging are closed, so
// their clients dial again.
func (p *cutProxy) restore() {
	p.mu.Lock()
	p.cutAt = false
	p.mu.Unlock()
	p.closeAll()
}

func (p *cutProxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}
