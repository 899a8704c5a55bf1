package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// The scale benchmark (Config.Scale, `make bench-scale`): per controller, on
// a fresh bare control plane, N MyKinds with replicas 0, the controller
// with its default flags (no --max-concurrent-reconciles), and the harness
// playing the Deployment controller as Deployments appear (it marks each
// one rolled out, as phase (b) does). It records:
//
//   - the time from the first create until every parent is Ready: the
//     engine's Ready condition True; the reference, which keeps no
//     conditions, once every Deployment exists with replicas 0 and has been
//     marked rolled out (the last thing its parents wait for);
//   - once the controller settled, its CPU time, peak RSS, and the peak
//     RSS's growth over N from after the warm-up;
//   - a restart with the N parents in place: the process stopped (SIGTERM)
//     and started again, the time from its exec to its first and to its
//     last reconcile (controller-runtime's reconcile counter on its
//     metrics endpoint, polled; the last is when the count stops moving,
//     with N+1 reconciles or more and an empty work queue), the peak RSS
//     once it settled, and its LIST requests by resource (the pages of
//     its informers' initial lists) and writes.

// scalePoll is how often the restart polls the controller's metrics. Each
// poll costs the controller the encoding of its metrics (at every 100 ms,
// gzipped, 8% of the engine's CPU over a restart, by its profile):
// uncompressed, every 200 ms.
const scalePoll = 200 * time.Millisecond

// metricsClient reads a controller's metrics without compression, which
// the controller would otherwise spend CPU on.
var metricsClient = &http.Client{Transport: &http.Transport{DisableCompression: true}}

// scaleStill is how long the reconcile count must hold still, with an
// empty work queue, for the restart's reconciles to be over.
const scaleStill = 3 * time.Second

// scaleResult is what one controller's scale run measured.
type scaleResult struct {
	controller string
	ready      time.Duration // first create -> every parent Ready
	cpu        time.Duration // start to settled after the creates
	rss, anon  int64         // peaks at settled, bytes
	warm       usage         // after the warm-up
	// upgradedFrom is the earlier engine the restart upgraded from, if any.
	upgradedFrom string
	requests     counts // controller requests, creates to settled
	restart      restartResult
}

// restartResult is the restart with N parents in place.
type restartResult struct {
	firstReconcile, lastReconcile time.Duration // from the exec
	reconciles                    float64
	rss, anon                     int64 // peaks once settled, bytes
	cpu                           time.Duration
	requests                      counts // the controller's requests, exec to settled
	// reconciledWrites are the controller's writes by the time its
	// reconciles were done (measureRestart), before paced ones;
	// settled is the exec to settled.
	reconciledWrites float64
	settled          time.Duration
	// watchLists counts the initial lists streamed through a watch
	// (WatchList), by resource, start to settled.
	watchLists counts
}

// runScale runs the scale benchmark for every controller.
func (h *Harness) runScale(ctx context.Context) (*Report, error) {
	rep := newReport(h.cfg)
	for _, name := range h.cfg.Controllers {
		if name != Engine && name != Reference {
			return rep, fmt.Errorf("the scale benchmark runs the engine and the reference, not %s", name)
		}
		res, err := h.scaleController(ctx, name)
		if err != nil {
			return rep, fmt.Errorf("%s: %w", name, err)
		}
		rep.Scale = append(rep.Scale, res)
	}
	rep.LoadEnd = loadAverage()
	return rep, nil
}

// scaleSpec runs a controller with its default flags, serving its metrics
// over plain HTTP on a loopback address chosen at each start.
func (h *Harness) scaleSpec(name string) (controllerSpec, *string) {
	addr := new(string)
	if name == Engine {
		return controllerSpec{name: name, bin: h.bins[h.cfg.EngineBin], crds: h.crds, templates: true, env: h.cfg.EngineEnv,
			args: func(kubeconfig, templates string) []string {
				return append([]string{"run", "--templates", templates, "--kubeconfig", kubeconfig,
					"--metrics-bind-address", *addr, "--metrics-secure=false", "--health-probe-bind-address", "0"}, h.cfg.EngineArgs...)
			}}, addr
	}
	return controllerSpec{name: name, bin: h.bins[filepath.Join(h.cfg.Root, "bin", name)], crds: h.crds,
		args: func(kubeconfig, _ string) []string {
			return []string{"--kubeconfig", kubeconfig, "--metrics-bind-address", *addr}
		}}, addr
}

// scaleController measures one controller at scale, then its restart.
func (h *Harness) scaleController(ctx context.Context, name string) (res *scaleResult, err error) {
	h.log.printf("=== %s at scale: N=%d, fresh control plane", name, h.cfg.N)
	upgrade := name == Engine && h.cfg.UpgradeFrom != ""
	crds := h.crds
	if upgrade {
		crds = h.oldCRDs
	}
	e, err := h.startEnv(ctx, crds)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, e.stop()) }()
	spec, addr := h.scaleSpec(name)
	first := spec
	if upgrade {
		first.bin = h.bins[h.cfg.UpgradeFrom]
		h.log.printf("  first as %s, then upgraded to %s", h.cfg.UpgradeFrom, h.cfg.EngineBin)
	}
	if *addr, err = freeAddress(); err != nil {
		return nil, fmt.Errorf("no free port for the metrics: %w", err)
	}
	base := filepath.Join(h.cfg.LogDir, "scale-"+name)
	templates := ""
	if spec.templates {
		templates = base + "-templates"
		if err := copyDir(h.cfg.Templates, templates); err != nil {
			return nil, fmt.Errorf("copying the templates: %w", err)
		}
	}
	g, wl, _, err := h.startUp(ctx, e, first, templates, base)
	stopped := false
	if g != nil {
		defer func() {
			if !stopped {
				err = errors.Join(err, g.stop())
			}
		}()
	}
	if wl != nil {
		defer wl.w.close()
	}
	if err != nil {
		return nil, err
	}
	for i := range wl.replicas {
		wl.replicas[i] = 0
	}
	stopMarking, err := wl.markRolledOut(ctx)
	if err != nil {
		return nil, err
	}
	defer stopMarking()
	prev, err := h.settle(ctx, wl, g)
	if err != nil {
		return nil, err
	}
	res = &scaleResult{controller: name, warm: total(prev.use)}
	ready := phase{key: phaseAllReady, parents: wl.n,
		goal: func() goal { return wl.readyGoal(name) },
		act:  func(ctx context.Context) error { return wl.forEach(ctx, wl.all(), wl.createMyKind) }}
	if res.ready, err = h.runPhase(ctx, wl, ready, g.alive); err != nil {
		return res, err
	}
	snap, err := h.settle(ctx, wl, g)
	if err != nil {
		return res, err
	}
	now := total(snap.use)
	res.cpu, res.rss, res.anon = now.cpu, now.rss, now.anon
	res.requests = snap.controllerRequests(prev)

	h.log.printf("  restart with %d parents in place", wl.n)
	stopped = true
	if err := g.stop(); err != nil {
		return res, err
	}
	if upgrade {
		h.log.printf("  upgrade: updating the CRDs to %s's", h.cfg.EngineBin)
		if err := e.updateCRDs(ctx, h.crds); err != nil {
			return res, err
		}
		res.upgradedFrom = h.cfg.UpgradeFrom
	}
	if *addr, err = freeAddress(); err != nil {
		return res, fmt.Errorf("no free port for the metrics: %w", err)
	}
	before, beforeOwn, err := e.scrape(ctx)
	if err != nil {
		return res, err
	}
	listsBefore, err := scrapeWatchLists(ctx, e)
	if err != nil {
		return res, err
	}
	g, err = h.startGroup(spec, e.cluster.Kubeconfig, templates, base+"-restart")
	if err != nil {
		return res, err
	}
	stopped = false
	if res.restart, err = h.measureRestart(ctx, g, "http://"+*addr+"/metrics", wl.n+1); err != nil {
		return res, err
	}
	early, earlyOwn, err := e.scrape(ctx)
	if err != nil {
		return res, err
	}
	res.restart.reconciledWrites = early.minus(before).minus(earlyOwn.minus(beforeOwn)).attributable().writes()
	snap, err = h.settle(ctx, wl, g)
	if err != nil {
		return res, err
	}
	res.restart.settled = time.Since(g.started())
	now = total(snap.use)
	res.restart.rss, res.restart.anon, res.restart.cpu = now.rss, now.anon, now.cpu
	res.restart.requests = snap.api.minus(before).minus(snap.own.minus(beforeOwn))
	lists, err := scrapeWatchLists(ctx, e)
	res.restart.watchLists = lists.minus(listsBefore)
	return res, err
}

// readyGoal is every parent Ready: the engine's Ready condition; for the
// reference, every Deployment with replicas 0 and rolled out.
func (wl *workload) readyGoal(controller string) goal {
	if controller == Engine {
		return goal{on: onMyKinds, namespace: benchNamespace, want: wl.n, ok: func(obj any) bool {
			u, ok := obj.(*unstructured.Unstructured)
			return ok && conditionTrue(u, "Ready")
		}}
	}
	return goal{on: onDeployments, namespace: benchNamespace, want: wl.n, ok: func(obj any) bool {
		d, ok := obj.(*appsv1.Deployment)
		return ok && wl.hasReplicas(obj) && rolledOut(d)
	}}
}

// conditionTrue reports whether u has condition typ with status True.
func conditionTrue(u *unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == typ {
			return m["status"] == "True"
		}
	}
	return false
}

// rolledOut reports whether the harness marked d rolled out at its
// generation.
func rolledOut(d *appsv1.Deployment) bool {
	return d.Status.ObservedGeneration == d.Generation && len(d.Status.Conditions) > 0
}

// markRolledOut plays the Deployment controller for the scale benchmark:
// each Deployment of the workload that appears or changes spec is marked
// rolled out (setReady), by the harness's clients concurrency of
// goroutines. The returned stop ends them and waits.
func (wl *workload) markRolledOut(ctx context.Context) (stop func(), err error) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[int]())
	enqueue := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		d, i, ok := wl.deploymentOf(obj)
		if ok && d.Namespace == benchNamespace && !rolledOut(d) {
			q.Add(i)
		}
	}
	reg, err := wl.w.informers[onDeployments].AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }})
	if err != nil {
		return nil, fmt.Errorf("watching Deployments to mark them rolled out: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		g := make(chan struct{}, wl.clients)
		for {
			i, shutdown := q.Get()
			if shutdown {
				for range wl.clients {
					g <- struct{}{}
				}
				return
			}
			g <- struct{}{}
			go func() {
				defer func() { <-g; q.Done(i) }()
				if err := wl.setReady(ctx, i); err != nil && ctx.Err() == nil {
					q.AddRateLimited(i)
					return
				}
				q.Forget(i)
			}()
		}
	}()
	return func() {
		_ = wl.w.informers[onDeployments].RemoveEventHandler(reg)
		cancel()
		q.ShutDown()
		<-done
	}, nil
}

// measureRestart polls the restarted controller's metrics until its
// reconciles are over: at least want of them, the count still for
// scaleStill and its work queues empty.
func (h *Harness) measureRestart(ctx context.Context, g group, url string, want int) (restartResult, error) {
	var out restartResult
	start := g.started()
	deadline := time.Now().Add(h.cfg.PhaseTimeout)
	lastChange, lastLog := time.Now(), time.Now()
	ticker := time.NewTicker(scalePoll)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-ticker.C:
		}
		if err := g.alive(); err != nil {
			return out, err
		}
		if time.Now().After(deadline) {
			return out, fmt.Errorf("restart: %.0f of %d reconciles after %s", out.reconciles, want, h.cfg.PhaseTimeout)
		}
		m, err := scrapeReconciles(ctx, url)
		if err != nil {
			continue // not serving yet
		}
		now := time.Now()
		if m.reconciles > 0 && out.firstReconcile == 0 {
			out.firstReconcile = now.Sub(start)
		}
		if m.reconciles != out.reconciles {
			out.reconciles, out.lastReconcile, lastChange = m.reconciles, now.Sub(start), now
		}
		if now.Sub(lastLog) >= progressEvery {
			h.log.printf("  restart: %.0f reconciles after %s", out.reconciles, since(start))
			lastLog = now
		}
		if out.reconciles >= float64(want) && m.depth == 0 && now.Sub(lastChange) >= scaleStill {
			h.log.printf("  restart: first reconcile %s, last %s after the exec (%.0f reconciles)",
				round(out.firstReconcile), round(out.lastReconcile), out.reconciles)
			return out, nil
		}
	}
}

// reconcileMetrics are controller-runtime's reconcile count and work queue
// depth, summed over controllers.
type reconcileMetrics struct{ reconciles, depth float64 }

// scrapeReconciles reads a controller's reconcile counts from its metrics
// endpoint.
func scrapeReconciles(ctx context.Context, url string) (reconcileMetrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return reconcileMetrics{}, err
	}
	resp, err := metricsClient.Do(req)
	if err != nil {
		return reconcileMetrics{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return reconcileMetrics{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return reconcileMetrics{}, fmt.Errorf("reading the metrics: %s", resp.Status)
	}
	return parseReconciles(raw)
}

// parseReconciles sums controller_runtime_reconcile_total and
// workqueue_depth from the Prometheus text format.
func parseReconciles(raw []byte) (reconcileMetrics, error) {
	var out reconcileMetrics
	for line := range strings.Lines(string(raw)) {
		var sum *float64
		switch {
		case strings.HasPrefix(line, "controller_runtime_reconcile_total{"):
			sum = &out.reconciles
		case strings.HasPrefix(line, "workqueue_depth{"):
			sum = &out.depth
		default:
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return out, fmt.Errorf("malformed metric line %q: %w", strings.TrimSpace(line), err)
		}
		*sum += v
	}
	return out, nil
}

// watchListPrefix starts the apiserver's count of watch-list requests.
const watchListPrefix = "apiserver_watch_list_duration_seconds_count{"

// scrapeWatchLists reads how many initial lists the apiserver streamed
// through a watch (WatchList), by resource.
func scrapeWatchLists(ctx context.Context, e *env) (counts, error) {
	raw, err := e.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading apiserver metrics: %w", err)
	}
	return parseWatchLists(raw)
}

// parseWatchLists sums apiserver_watch_list_duration_seconds_count by
// resource.
func parseWatchLists(raw []byte) (counts, error) {
	out := counts{}
	for line := range strings.Lines(string(raw)) {
		if !strings.HasPrefix(line, watchListPrefix) {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			return nil, fmt.Errorf("malformed metric line %q", strings.TrimSpace(line))
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			return nil, fmt.Errorf("malformed metric line %q: %w", strings.TrimSpace(line), err)
		}
		out[parseLabels(line[len(watchListPrefix):end])["resource"]] += v
	}
	return out, nil
}
