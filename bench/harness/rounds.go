package harness

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"
)

// runController measures one controller on a fresh control plane.
func (h *Harness) runController(ctx context.Context, spec controllerSpec, round int) (res *runResult, err error) {
	h.log.printf("=== %s, round %d/%d: fresh control plane", spec.name, round, h.cfg.Rounds)
	e, err := h.startEnv(ctx, spec.crds)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, e.stop()) }()
	base := filepath.Join(h.cfg.LogDir, fmt.Sprintf("r%d-%s", round, spec.name))
	templates := ""
	if spec.templates {
		// Phase (e) edits the templates: the engine watches a copy.
		templates = base + "-templates"
		if err := copyDir(h.cfg.Templates, templates); err != nil {
			return nil, fmt.Errorf("copying the templates: %w", err)
		}
	}
	g, wl, startup, err := h.startUp(ctx, e, spec, templates, base)
	if g != nil {
		defer func() { err = errors.Join(err, g.stop()) }()
	}
	if wl != nil {
		defer wl.w.close()
	}
	if err != nil {
		return nil, err
	}
	h.log.printf("  start until first child: %s", startup.Round(10*time.Millisecond))
	res, err = h.measure(ctx, wl, g, spec, templates, round)
	if err != nil {
		return res, err
	}
	res.startup = startup
	if spec.pprof != "" {
		// Only now: fetching a profile touches pages of the binary and
		// would inflate the peak RSS of a later usage reading.
		if res.heap, err = h.heapProfile(ctx, spec.pprof, base+"-heap.pprof"); err != nil {
			return res, err
		}
	}
	if spec.replicas == 0 {
		return res, nil
	}
	res.replicas, err = replicaResults(wl, g, res.use)
	return res, err
}

// startUp starts the controller and waits until it created the warm-up
// parent's Deployment, returning the time from the exec of its (first)
// process until the harness's informers saw that Deployment. Without a
// prepare step the warm-up parent exists before the controller starts;
// with one (kro generates the MyKind CRD; the sharded engine waits for
// its shard Leases) it is created after the step, which the time
// includes. The group and workload returned are to be stopped and closed
// even with an error.
func (h *Harness) startUp(ctx context.Context, e *env, spec controllerSpec, templates, base string) (group, *workload, time.Duration, error) {
	if spec.prepare != nil {
		g, err := h.startGroup(spec, e.cluster.Kubeconfig, templates, base)
		if err != nil {
			return nil, nil, 0, err
		}
		if err := spec.prepare(ctx, e, g.alive); err != nil {
			return g, nil, 0, err
		}
		w, err := startWatcher(ctx, e.cs, e.dyn)
		if err != nil {
			return g, nil, 0, err
		}
		wl := newWorkload(e, w, h.cfg.N, h.cfg.Clients)
		seen, err := wl.warmUp(ctx, h.log, g.alive)
		return g, wl, seen.Sub(g.started()), err
	}
	w, err := startWatcher(ctx, e.cs, e.dyn)
	if err != nil {
		return nil, nil, 0, err
	}
	wl := newWorkload(e, w, h.cfg.N, h.cfg.Clients)
	t, err := wl.createWarmUp(ctx)
	if err != nil {
		return nil, wl, 0, err
	}
	g, err := h.startGroup(spec, e.cluster.Kubeconfig, templates, base)
	if err != nil {
		return nil, wl, 0, err
	}
	seen, err := wl.awaitWarmUp(ctx, t, h.log, g.alive)
	return g, wl, seen.Sub(g.started()), err
}

// startGroup starts the controller's processes: one, or spec.replicas,
// each logging to its own file.
func (h *Harness) startGroup(spec controllerSpec, kubeconfig, templates, base string) (group, error) {
	var g group
	for i := range max(spec.replicas, 1) {
		args, logPath := spec.args(kubeconfig, templates), base+".log"
		if spec.replicas > 0 {
			args, logPath = append(args, spec.replicaArgs(i)...), fmt.Sprintf("%s-%d.log", base, i)
		}
		var cg *memoryCgroup
		if h.cfg.MemoryLimit > 0 {
			c, err := newMemoryCgroup(filepath.Base(base), h.cfg.MemoryLimit)
			if err != nil {
				return nil, errors.Join(err, g.stop())
			}
			cg = c
		}
		p, err := startProcess(spec.bin, args, spec.env, logPath, cg)
		if err != nil {
			return nil, errors.Join(err, g.stop())
		}
		g = append(g, p)
		h.log.printf("started %s (pid %d, log %s)", spec.name, p.cmd.Process.Pid, p.logPath)
	}
	return g, nil
}

// measure runs the phases and collects times, requests and usage.
func (h *Harness) measure(ctx context.Context, wl *workload, g group, spec controllerSpec, templates string, round int) (*runResult, error) {
	res := &runResult{controller: spec.name, round: round, phases: map[string]time.Duration{},
		skipped: map[string]string{}, requests: map[string]counts{}, parents: map[string]int{},
		phaseCPU: map[string]time.Duration{}, busy: map[string]time.Duration{},
		controlPlaneCPU: map[string]time.Duration{}}
	prev, err := h.settle(ctx, wl, g)
	if err != nil {
		return nil, err
	}
	res.warm = total(prev.use)
	phases := []phase{wl.createPhase(), wl.statusPhase(), wl.recreatePhase(), wl.scalePhase()}
	if spec.edit != nil && len(h.cfg.Shards) == 0 { // the sharding benchmark stops after (d)
		phases = append(phases, wl.reloadPhase(func(ctx context.Context) error { return spec.edit(ctx, wl.env, templates) }, h.cfg.ReloadTimeout))
	}
	for _, ph := range phases {
		if prev, err = h.measurePhase(ctx, wl, g, spec, ph, prev, res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// measurePhase runs one phase, waits for the controller to settle and
// records the phase's time, requests and usage in res. It returns the
// snapshot taken once the controller settled.
func (h *Harness) measurePhase(ctx context.Context, wl *workload, g group, spec controllerSpec, ph phase, prev snapshot, res *runResult) (snapshot, error) {
	start := time.Now()
	d, err := h.runPhase(ctx, wl, ph, g.alive)
	if errors.Is(err, errNotSupported) {
		h.log.printf("  %s: n/a (%v)", phaseTitles[ph.key], err)
		res.skipped[ph.key] = fmt.Sprintf("no Deployment changed within %s", h.cfg.ReloadTimeout)
		return prev, nil
	}
	if err != nil {
		return prev, err
	}
	snap, err := h.settle(ctx, wl, g)
	if err != nil {
		return prev, err
	}
	now := total(snap.use)
	res.phases[ph.key], res.parents[ph.key] = d, ph.parents
	res.requests[ph.key] = snap.controllerRequests(prev)
	res.phaseCPU[ph.key] = now.cpu - total(prev.use).cpu
	if snap.hasControlPlane && prev.hasControlPlane {
		res.controlPlaneCPU[ph.key] = snap.controlPlane - prev.controlPlane
	}
	res.busy[ph.key] = wl.w.lastEventAt().Sub(start)
	if ph.key == phaseScale {
		res.cpu, res.rss, res.anon, res.use = now.cpu, now.rss, now.anon, snap.use
		if spec.evaluations != nil {
			if res.evaluations, err = spec.evaluations(ctx); err != nil {
				return snap, err
			}
		}
	}
	res.cpuEnd, res.rssEnd = now.cpu, now.rss
	return snap, nil
}

// runRaw times the harness creating the Deployments itself.
func (h *Harness) runRaw(ctx context.Context, round int) (d time.Duration, err error) {
	h.log.printf("=== raw, round %d/%d: fresh control plane", round, h.cfg.Rounds)
	e, err := h.startEnv(ctx, h.crds)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, e.stop()) }()
	w, err := startWatcher(ctx, e.cs, e.dyn)
	if err != nil {
		return 0, err
	}
	defer w.close()
	wl := newWorkload(e, w, h.cfg.N, h.cfg.Clients)
	return h.runPhase(ctx, wl, wl.rawPhase(), func() error { return nil })
}

// runPhase starts tracking the phase's goal, acts, and returns the time
// until the goal was reached.
func (h *Harness) runPhase(ctx context.Context, wl *workload, ph phase, alive func() error) (time.Duration, error) {
	title := phaseTitles[ph.key]
	t := wl.w.track(ph.goal())
	h.log.printf("  %s ...", title)
	start := time.Now()
	acted := make(chan error, 1)
	go func() { acted <- ph.act(ctx) }()
	waitErr := wl.await(ctx, t, title, h.cfg.PhaseTimeout, ph.stall, h.log, alive)
	elapsed := time.Since(start)
	if err := <-acted; err != nil {
		return 0, err
	}
	if waitErr != nil {
		return 0, waitErr
	}
	h.log.printf("  %s: %s", title, round(elapsed))
	return elapsed, nil
}
