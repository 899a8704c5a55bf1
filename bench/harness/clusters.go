package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/internal/localcluster"
)

// The benchmark of children in other clusters (issue 40, `-clusters 1,5`):
// per count K of workload clusters, a fresh bare management control plane
// and K bare workload control planes (etcd and kube-apiserver each), each
// workload cluster registered by its cluster Secret; the engine with a
// template whose one child, a ConfigMap, goes to the workload cluster its
// parent names. N parents are spread round-robin over the K clusters. It
// reports the time from each parent's create request to its ConfigMap in
// the workload cluster (seen by the harness's informer there) and to the
// parent Ready, and the engine's memory growth per remote child. It fails
// unless every child is in the cluster its parent names and every parent
// is Ready.

// ClustersConfig configures the benchmark of children in other clusters.
type ClustersConfig struct {
	Root       string // repository root
	EngineBin  string // default Root/bin/engine
	LogDir     string // the engine's logs and the generated templates
	N          int    // parents per run
	Clusters   []int  // counts of workload clusters, one run each
	Workers    int    // --max-concurrent-reconciles
	Clients    int    // concurrent create requests
	Timeout    time.Duration
	EngineArgs []string // extra engine flags
}

// ClustersResult is one run of the benchmark.
type ClustersResult struct {
	Clusters, N int
	// ToChild and ToReady are, per parent, the time from its create
	// request to its ConfigMap in the workload cluster and to its Ready
	// condition, sorted.
	ToChild, ToReady []time.Duration
	// AllChildren and AllReady run from the first create request to the
	// last child seen and the last parent Ready.
	AllChildren, AllReady time.Duration
	// The engine's RSS (VmRSS) and peak anonymous RSS before the
	// parents, after the warm-up settled; its peak RSS (VmHWM), RSS and
	// peak anonymous RSS once the N parents settled.
	RSSBefore, AnonBefore, HWMAfter, RSSAfter, AnonAfter int64
	CPU                                                  time.Duration
	Load                                                 string
	// AtRest are, for parents created one at a time once the run
	// settled, the time from the create request to the child, sorted.
	AtRest []time.Duration
	// ChildRequests are the requests on ConfigMaps, watches left out, in
	// the clusters the children went to, from the first create until the
	// run settled: the engine's (the harness only watches them).
	ChildRequests counts
}

// ClustersReport is the benchmark's result.
type ClustersReport struct {
	Config  ClustersConfig
	Started time.Time
	Runs    []ClustersResult
}

// clustersNamespace holds the cluster Secrets in the management cluster.
const clustersNamespace = "bench-clusters"

// clustersAtRest is how many parents are created one at a time at the
// end of a run, each once the previous one's child is there and it is
// Ready.
const clustersAtRest = 10

// clustersSettle is how long the engine is left alone before its memory
// is read: its queues drain and the runtime returns what it freed.
const clustersSettle = 5 * time.Second

// remoteGVR is the benchmark's parent kind.
var remoteGVR = schema.GroupVersionResource{Group: "bench.example.com", Version: "v1", Resource: "remotes"}

// RunClusters runs the benchmark once per count of workload clusters,
// progress lines to progress.
func RunClusters(ctx context.Context, cfg ClustersConfig, progress io.Writer) (*ClustersReport, error) {
	if cfg.EngineBin == "" {
		cfg.EngineBin = filepath.Join(cfg.Root, "bin", "engine")
	}
	rep := &ClustersReport{Config: cfg, Started: time.Now()}
	log := &logger{w: progress}
	for _, k := range cfg.Clusters {
		if k < 0 {
			return rep, fmt.Errorf("a count of workload clusters is 0 or more, not %d", k)
		}
		res, err := runClusters(ctx, cfg, k, log)
		if err != nil {
			return rep, fmt.Errorf("%d workload clusters: %w", k, err)
		}
		rep.Runs = append(rep.Runs, *res)
	}
	return rep, nil
}

// clusterName is the name of the i-th workload cluster; -1 is the
// management cluster, where the child of a run with no workload cluster
// goes.
func clusterName(i int) string {
	if i < 0 {
		return "local"
	}
	return fmt.Sprintf("w%d", i)
}

// remoteTemplate is the benchmark's template for k workload clusters; with
// none, the baseline: the same child in the parent's own cluster.
func remoteTemplate(k int) string {
	if k == 0 {
		return `// The baseline of the benchmark of children in other clusters
// (bench/harness/clusters.go): the ConfigMap beside its parent.
package remote

parent: {
	apiVersion: "bench.example.com/v1"
	kind:       "Remote"
	spec: cluster: string
}

children: note: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: parent.metadata.name
	data: owner: parent.metadata.name
}
`
	}
	names := make([]string, k)
	for i := range names {
		names[i] = fmt.Sprintf("%q", clusterName(i))
	}
	return `// The benchmark of children in other clusters (bench/harness/clusters.go):
// one ConfigMap in the workload cluster the parent names.
package remote

parent: {
	apiVersion: "bench.example.com/v1"
	kind:       "Remote"
	spec: cluster: string
}

policy: clusters: [` + strings.Join(names, ", ") + `]

children: note: {
	cluster:    parent.spec.cluster
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: parent.metadata.name
	data: owner: parent.metadata.name
}
`
}

// clustersRun is one run's control planes, clients and observations.
type clustersRun struct {
	log      *logger
	mgmt     *localcluster.Cluster
	workload []*localcluster.Cluster
	kube     kubernetes.Interface
	dyn      dynamic.Interface

	mu       sync.Mutex
	sent     map[string]time.Time // parent -> its create request
	child    map[string]time.Time // child (named as its parent) -> first seen
	childIn  map[string]int       // child -> the workload cluster it was seen in
	ready    map[string]time.Time // parent -> first seen Ready
	wrongDup []string             // children seen in a second cluster
}

func (r *clustersRun) stop() error {
	var errs []error
	for _, c := range r.workload {
		errs = append(errs, c.Stop())
	}
	if r.mgmt != nil {
		errs = append(errs, r.mgmt.Stop())
	}
	return errors.Join(errs...)
}

// runClusters is one run with k workload clusters.
func runClusters(ctx context.Context, cfg ClustersConfig, k int, log *logger) (res *ClustersResult, err error) {
	log.printf("=== children in other clusters: %d workload clusters, N=%d", k, cfg.N)
	templates := filepath.Join(cfg.LogDir, fmt.Sprintf("clusters-%d-templates", k))
	if err := os.MkdirAll(templates, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(templates, "remote.cue"), []byte(remoteTemplate(k)), 0o644); err != nil {
		return nil, err
	}
	crds, err := loadCRDs(ctx, cfg.EngineBin, templates)
	if err != nil {
		return nil, err
	}
	r := &clustersRun{log: log, sent: map[string]time.Time{}, child: map[string]time.Time{}, childIn: map[string]int{}, ready: map[string]time.Time{}}
	defer func() { err = errors.Join(err, r.stop()) }()
	log.printf("  starting the management control plane")
	if r.mgmt, err = localcluster.Start(ctx, localcluster.Options{CRDs: crds, Progress: log.w}); err != nil {
		return nil, err
	}
	for i := range k {
		log.printf("  starting workload control plane %s (%d of %d)", clusterName(i), i+1, k)
		c, err := localcluster.Start(ctx, localcluster.Options{Progress: log.w})
		if err != nil {
			return nil, err
		}
		r.workload = append(r.workload, c)
	}
	if err := r.prepare(ctx); err != nil {
		return nil, err
	}
	ictx, stopInformers := context.WithCancel(ctx)
	var informers sync.WaitGroup
	defer func() { stopInformers(); informers.Wait() }()
	if err := r.watch(ictx, &informers); err != nil {
		return nil, err
	}

	args := append([]string{"run", "--templates", templates, "--kubeconfig", r.mgmt.Kubeconfig,
		"--clusters-namespace", clustersNamespace, "--max-concurrent-reconciles", fmt.Sprint(cfg.Workers),
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0"}, cfg.EngineArgs...)
	logPath := filepath.Join(cfg.LogDir, fmt.Sprintf("clusters-%d-engine.log", k))
	log.printf("  starting the engine (log %s)", logPath)
	p, err := startProcess(cfg.EngineBin, args, nil, logPath, nil)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, p.stop()) }()

	// One parent per cluster first: each cluster's cache starts, and the
	// engine's memory is read once that has settled.
	warm := make([]string, max(k, 1))
	for i := range warm {
		warm[i] = fmt.Sprintf("warm-%d", i)
	}
	if err := r.create(ctx, warm, 1); err != nil {
		return nil, err
	}
	if err := r.await(ctx, warm, cfg.Timeout, p.alive); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	log.printf("  warm-up: one parent per cluster Ready; settling %s", clustersSettle)
	if err := pause(ctx, clustersSettle); err != nil {
		return nil, err
	}
	pid := p.cmd.Process.Pid
	res = &ClustersResult{Clusters: k, N: cfg.N}
	if res.RSSBefore, err = statusKiB(pid, "VmRSS:"); err != nil {
		return nil, err
	}
	res.AnonBefore = p.anon.get()

	names := make([]string, cfg.N)
	for j := range names {
		names[j] = fmt.Sprintf("r-%05d", j)
	}
	before, err := r.childRequests(ctx)
	if err != nil {
		return nil, err
	}
	log.printf("  creating %d parents, %d at a time", cfg.N, cfg.Clients)
	first := time.Now()
	if err := r.create(ctx, names, cfg.Clients); err != nil {
		return nil, err
	}
	if err := r.await(ctx, names, cfg.Timeout, p.alive); err != nil {
		return nil, err
	}
	log.printf("  every child in its cluster and every parent Ready; settling %s", clustersSettle)
	if err := pause(ctx, clustersSettle); err != nil {
		return nil, err
	}
	use, err := p.usage()
	if err != nil {
		return nil, err
	}
	res.HWMAfter, res.AnonAfter, res.CPU = use.rss, use.anon, use.cpu
	if res.RSSAfter, err = statusKiB(pid, "VmRSS:"); err != nil {
		return nil, err
	}
	if err := r.verify(names, k); err != nil {
		return nil, err
	}
	after, err := r.childRequests(ctx)
	if err != nil {
		return nil, err
	}
	res.ChildRequests = after.minus(before)
	r.mu.Lock()
	var lastChild, lastReady time.Time
	for _, n := range names {
		res.ToChild = append(res.ToChild, r.child[n].Sub(r.sent[n]))
		res.ToReady = append(res.ToReady, r.ready[n].Sub(r.sent[n]))
		lastChild, lastReady = later(lastChild, r.child[n]), later(lastReady, r.ready[n])
	}
	r.mu.Unlock()
	slices.Sort(res.ToChild)
	slices.Sort(res.ToReady)
	res.AllChildren, res.AllReady = lastChild.Sub(first), lastReady.Sub(first)
	// One parent at a time, the engine otherwise idle: the latency of
	// one create rather than of a burst.
	for i := range clustersAtRest {
		name := fmt.Sprintf("one-%d", i)
		if err := r.create(ctx, []string{name}, 1); err != nil {
			return nil, err
		}
		if err := r.await(ctx, []string{name}, cfg.Timeout, p.alive); err != nil {
			return nil, err
		}
		if err := r.verify([]string{name}, k); err != nil {
			return nil, err
		}
		r.mu.Lock()
		res.AtRest = append(res.AtRest, r.child[name].Sub(r.sent[name]))
		r.mu.Unlock()
	}
	slices.Sort(res.AtRest)
	res.Load = loadAverage()
	log.printf("  create to remote child: median %s, p95 %s; RSS growth per remote child %s",
		round(quantile(res.ToChild, 0.5)), round(quantile(res.ToChild, 0.95)), kib(float64(res.HWMAfter-res.RSSBefore)/float64(cfg.N)))
	return res, nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// childRequests sums the apiservers' requests on ConfigMaps, watches left
// out, in the clusters the children go to.
func (r *clustersRun) childRequests(ctx context.Context) (counts, error) {
	cfgs := []*rest.Config{r.mgmt.Config}
	if len(r.workload) > 0 {
		cfgs = nil
		for _, c := range r.workload {
			cfgs = append(cfgs, c.Config)
		}
	}
	sum := counts{}
	for _, cfg := range cfgs {
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		c, err := scrapeAPIServer(ctx, kube.CoreV1().RESTClient())
		if err != nil {
			return nil, err
		}
		for key, v := range c {
			if verb, res := splitKey(key); res == "configmaps" && verb != "WATCH" {
				sum[key] += v
			}
		}
	}
	return sum, nil
}

// pause waits d, or less if ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// prepare builds the management cluster's clients, the namespaces, and a
// cluster Secret per workload cluster.
func (r *clustersRun) prepare(ctx context.Context) error {
	cfg := rest.CopyConfig(r.mgmt.Config)
	cfg.QPS, cfg.Burst = harnessQPS, harnessQPS
	var err error
	if r.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if r.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return err
	}
	for _, ns := range []string{benchNamespace, clustersNamespace} {
		if err := createNamespace(ctx, r.kube, ns); err != nil {
			return err
		}
	}
	for i, c := range r.workload {
		wk, err := kubernetes.NewForConfig(c.Config)
		if err != nil {
			return err
		}
		if err := createNamespace(ctx, wk, benchNamespace); err != nil {
			return fmt.Errorf("cluster %s: %w", clusterName(i), err)
		}
		data, err := os.ReadFile(c.Kubeconfig)
		if err != nil {
			return err
		}
		sec := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: clusterName(i), Namespace: clustersNamespace, Labels: map[string]string{contract.LabelCluster: clusterName(i)}},
			Data:       map[string][]byte{contract.KeyKubeconfig: data},
		}
		if _, err := r.kube.CoreV1().Secrets(clustersNamespace).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("registering cluster %s: %w", clusterName(i), err)
		}
	}
	return nil
}

func createNamespace(ctx context.Context, kube kubernetes.Interface, ns string) error {
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	return nil
}

// watch starts the informers that time the children (per workload
// cluster, the engine's ConfigMaps) and the parents' Ready; they stop when
// ctx ends, wg waiting for them.
func (r *clustersRun) watch(ctx context.Context, wg *sync.WaitGroup) error {
	managed := func(o *metav1.ListOptions) {
		o.LabelSelector = contract.LabelManagedBy + "=" + contract.ManagedByValue
	}
	var synced []cache.InformerSynced
	configs := map[int]*rest.Config{-1: r.mgmt.Config} // no workload cluster: the children are local
	if len(r.workload) > 0 {
		configs = map[int]*rest.Config{}
		for i, c := range r.workload {
			configs[i] = c.Config
		}
	}
	for i, cfg := range configs {
		wk, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		f := informers.NewSharedInformerFactoryWithOptions(wk, 0, informers.WithNamespace(benchNamespace), informers.WithTweakListOptions(managed))
		inf := f.Core().V1().ConfigMaps().Informer()
		seen := func(obj any) {
			if cm, ok := obj.(*corev1.ConfigMap); ok {
				r.sawChild(cm.Name, i)
			}
		}
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, n any) { seen(n) }}); err != nil {
			return err
		}
		f.Start(ctx.Done())
		wg.Go(func() { <-ctx.Done(); f.Shutdown() })
		synced = append(synced, inf.HasSynced)
	}
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(r.dyn, 0, benchNamespace, nil)
	inf := f.ForResource(remoteGVR).Informer()
	ready := func(obj any) {
		if u, ok := obj.(*unstructured.Unstructured); ok && conditionTrue(u, "Ready") {
			r.sawReady(u.GetName())
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: ready, UpdateFunc: func(_, n any) { ready(n) }}); err != nil {
		return err
	}
	f.Start(ctx.Done())
	wg.Go(func() { <-ctx.Done(); f.Shutdown() })
	synced = append(synced, inf.HasSynced)
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return errors.New("the harness's informers did not sync")
	}
	return nil
}

func (r *clustersRun) sawChild(name string, cluster int) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if in, ok := r.childIn[name]; ok {
		if in != cluster {
			r.wrongDup = append(r.wrongDup, fmt.Sprintf("%s in %s and %s", name, clusterName(in), clusterName(cluster)))
		}
		return
	}
	r.child[name], r.childIn[name] = now, cluster
}

func (r *clustersRun) sawReady(name string) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.ready[name]; !ok {
		r.ready[name] = now
	}
}

// clusterOf is the workload cluster the benchmark's parent name goes to:
// the number after its last '-' round-robin (warm-I to cluster I); -1
// (local) when there is none.
func clusterOf(name string, k int) int {
	if k == 0 {
		return -1
	}
	n, _ := strconv.Atoi(name[strings.LastIndexByte(name, '-')+1:])
	return n % k
}

// create creates the parents, clients at a time, each noting when its
// request was sent.
func (r *clustersRun) create(ctx context.Context, names []string, clients int) error {
	k := len(r.workload)
	work := make(chan string)
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for range max(clients, 1) {
		wg.Go(func() {
			for name := range work {
				u := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": "bench.example.com/v1", "kind": "Remote",
					"metadata": map[string]any{"name": name, "namespace": benchNamespace},
					"spec":     map[string]any{"cluster": clusterName(clusterOf(name, k))},
				}}
				r.mu.Lock()
				r.sent[name] = time.Now()
				r.mu.Unlock()
				if _, err := r.dyn.Resource(remoteGVR).Namespace(benchNamespace).Create(ctx, u, metav1.CreateOptions{}); err != nil {
					select {
					case errs <- fmt.Errorf("creating Remote %s: %w", name, err):
					default:
					}
				}
			}
		})
	}
	for _, n := range names {
		select {
		case work <- n:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return ctx.Err()
	}
}

// await waits until every named parent's child has been seen and the
// parent is Ready, reporting progress every 5 seconds.
func (r *clustersRun) await(ctx context.Context, names []string, timeout time.Duration, alive func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	start, lastLog := time.Now(), time.Now()
	for {
		children, ready := r.count(names)
		if children == len(names) && ready == len(names) {
			return nil
		}
		if err := alive(); err != nil {
			return err
		}
		if time.Since(lastLog) >= 5*time.Second {
			r.log.printf("  %d of %d children seen, %d Ready (%s)", children, len(names), ready, since(start))
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("after %s, %d of %d children seen and %d parents Ready: %w", since(start), children, len(names), ready, ctx.Err())
		case <-tick.C:
		}
	}
}

func (r *clustersRun) count(names []string) (children, ready int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range names {
		if _, ok := r.child[n]; ok {
			children++
		}
		if _, ok := r.ready[n]; ok {
			ready++
		}
	}
	return children, ready
}

// verify checks that each child is in the cluster its parent names, and
// in no other.
func (r *clustersRun) verify(names []string, k int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.wrongDup) > 0 {
		return fmt.Errorf("children in two clusters: %s", strings.Join(r.wrongDup, "; "))
	}
	for _, n := range names {
		if got, want := r.childIn[n], clusterOf(n, k); got != want {
			return fmt.Errorf("the child of %s is in cluster %s, not %s", n, clusterName(got), clusterName(want))
		}
	}
	return nil
}

// quantile of sorted durations (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// kib formats bytes as KiB with one decimal.
func kib(b float64) string { return fmt.Sprintf("%.1f KiB", b/1024) }

// mibOf formats bytes as MiB with one decimal.
func mibOf(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/mib) }

// Write prints the report as Markdown.
func (rep *ClustersReport) Write(w io.Writer) {
	fmt.Fprintf(w, "## Children in other clusters\n\n%s, N=%d parents per run (one ConfigMap each in the workload cluster it names, round-robin), %d workers, %d concurrent creates, then %d parents one at a time; %d cores.\n\n",
		rep.Started.UTC().Format("2006-01-02 15:04 UTC"), rep.Config.N, rep.Config.Workers, rep.Config.Clients, clustersAtRest, runtime.NumCPU())
	fmt.Fprintln(w, "| workload clusters | one parent at a time, create to remote child: median / max | create to remote child: median / p95 / max | create to parent Ready: median / p95 | first create to last child / last Ready | engine RSS before | peak RSS after (VmHWM) | RSS after | growth per remote child (VmHWM - RSS before) / N | anon growth per child | engine CPU | requests on ConfigMaps per child | load (1/5/15 min) at end |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rep.Runs {
		clusters := fmt.Sprint(r.Clusters)
		if r.Clusters == 0 {
			clusters = "none: the child local (baseline)"
		}
		var reqs []string
		for _, key := range slices.Sorted(maps.Keys(r.ChildRequests)) {
			reqs = append(reqs, fmt.Sprintf("%s %.2f", strings.ToLower(strings.Fields(key)[0]), r.ChildRequests[key]/float64(r.N)))
		}
		fmt.Fprintf(w, "| %s | %s / %s | %s / %s / %s | %s / %s | %s / %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			clusters, round(quantile(r.AtRest, 0.5)), round(quantile(r.AtRest, 1)),
			round(quantile(r.ToChild, 0.5)), round(quantile(r.ToChild, 0.95)), round(quantile(r.ToChild, 1)),
			round(quantile(r.ToReady, 0.5)), round(quantile(r.ToReady, 0.95)),
			round(r.AllChildren), round(r.AllReady),
			mibOf(r.RSSBefore), mibOf(r.HWMAfter), mibOf(r.RSSAfter),
			kib(float64(r.HWMAfter-r.RSSBefore)/float64(r.N)), kib(float64(r.AnonAfter-r.AnonBefore)/float64(r.N)),
			round(r.CPU), strings.Join(reqs, ", "), r.Load)
	}
}
