package harness

import (
	"fmt"
	"io"
	"slices"
	"strings"
)

// writeScale prints the report of the scale benchmark (scale.go).
func (r *Report) writeScale(w io.Writer) {
	n := r.cfg.N
	names := make([]string, len(r.Scale))
	for i, res := range r.Scale {
		names[i] = res.controller
	}
	flags := "default flags"
	if len(r.cfg.EngineArgs)+len(r.cfg.EngineEnv) > 0 {
		flags += "; the engine with " + strings.Join(append(slices.Clone(r.cfg.EngineEnv), r.cfg.EngineArgs...), " ")
	}
	if r.cfg.MemoryLimit > 0 {
		flags += fmt.Sprintf("; each in a memory cgroup limited to %d MiB, as a container", r.cfg.MemoryLimit>>20)
	}
	fmt.Fprintf(w, "## scale: %s, N=%d MyKinds with replicas 0, %s\n\n", strings.Join(names, " vs "), n, flags)
	fmt.Fprintf(w, "Bare control plane (etcd + kube-apiserver), a fresh one per controller; the harness marks each\n"+
		"Deployment rolled out as it appears. Load average before: %s, after: %s.\n\n", r.LoadStart, r.LoadEnd)
	t := &table{header: append(append([]string{"metric"}, names...), ratioHeader(names)...)}
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	rows := []struct {
		name   string
		value  func(*scaleResult) float64
		format string
	}{
		{"time until every parent Ready s (first create -> last Ready)", func(s *scaleResult) float64 { return s.ready.Seconds() }, "%.1f"},
		{"CPU s, start to settled", func(s *scaleResult) float64 { return s.cpu.Seconds() }, "%.1f"},
		{"peak RSS MiB", func(s *scaleResult) float64 { return mib(s.rss) }, "%.0f"},
		{"peak anonymous RSS MiB", func(s *scaleResult) float64 { return mib(s.anon) }, "%.0f"},
		{"peak RSS growth per parent KiB, (settled - after warm-up) / N", func(s *scaleResult) float64 { return perParentKiB(s.rss-s.warm.rss, n) }, "%.1f"},
		{"writes per parent, creates to settled", func(s *scaleResult) float64 { return s.requests.writes() / float64(n) }, "%.2f"},
		{"restart: exec -> first reconcile s", func(s *scaleResult) float64 { return s.restart.firstReconcile.Seconds() }, "%.2f"},
		{"restart: exec -> last reconcile s", func(s *scaleResult) float64 { return s.restart.lastReconcile.Seconds() }, "%.1f"},
		{"restart: reconciles", func(s *scaleResult) float64 { return s.restart.reconciles }, "%.0f"},
		{"restart: peak RSS MiB, exec to settled", func(s *scaleResult) float64 { return mib(s.restart.rss) }, "%.0f"},
		{"restart: CPU s, exec to settled", func(s *scaleResult) float64 { return s.restart.cpu.Seconds() }, "%.1f"},
		{"restart: LIST requests on mykinds (pages)", func(s *scaleResult) float64 { return s.restart.requests["LIST mykinds"] }, "%.0f"},
		{"restart: LIST requests on deployments (pages)", func(s *scaleResult) float64 { return s.restart.requests["LIST deployments"] }, "%.0f"},
		{"restart: initial lists streamed by watch, mykinds", func(s *scaleResult) float64 { return s.restart.watchLists["mykinds"] }, "%.0f"},
		{"restart: initial lists streamed by watch, deployments", func(s *scaleResult) float64 { return s.restart.watchLists["deployments"] }, "%.0f"},
		{"restart: writes on mykinds, deployments, events", func(s *scaleResult) float64 { return s.restart.requests.attributable().writes() }, "%.0f"},
		{"restart: of those, written by the last reconcile + 3 s", func(s *scaleResult) float64 { return s.restart.reconciledWrites }, "%.0f"},
		{"restart: exec -> settled s", func(s *scaleResult) float64 { return s.restart.settled.Seconds() }, "%.1f"},
	}
	for _, row := range rows {
		cells := []string{row.name}
		var vals []float64
		for _, res := range r.Scale {
			v := row.value(res)
			vals = append(vals, v)
			cells = append(cells, fmt.Sprintf(row.format, v))
		}
		cells = append(cells, ratioCells(names, vals)...)
		t.add(cells)
	}
	t.write(w)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "- Ready: the engine's Ready condition True on every MyKind; the reference keeps no conditions, so for it every")
	fmt.Fprintln(w, "  Deployment with replicas 0, marked rolled out by the harness.")
	fmt.Fprintln(w, "- CPU and peak RSS are the controller process's (/proc utime+stime, VmHWM), its child processes' added.")
	fmt.Fprintf(w, "- Restart: the controller stopped with SIGTERM and started again; first and last reconcile from its\n"+
		"  controller_runtime_reconcile_total, polled every %s (the last: the count still for %s, work queues empty).\n", scalePoll, scaleStill)
	fmt.Fprintln(w, "- LIST requests are the apiserver's count over the restart, one per page of an informer's initial list;")
	fmt.Fprintln(w, "  an informer that lists through a watch stream (WatchList) makes none, and counts in the streamed row")
	fmt.Fprintln(w, "  (apiserver_watch_list_duration_seconds_count).")
	for _, res := range r.Scale {
		var keys []string
		for k, v := range res.restart.requests.attributable() {
			if v > 0 {
				keys = append(keys, fmt.Sprintf("%s %.0f", k, v))
			}
		}
		slices.Sort(keys)
		what := "restart"
		if res.upgradedFrom != "" {
			what = "upgrade (restart from " + res.upgradedFrom + ", its CRDs updated first)"
		}
		fmt.Fprintf(w, "- %s %s requests (watches excluded): %s.\n", res.controller, what, strings.Join(keys, ", "))
	}
}

// ratioHeader is the engine/reference column when both ran.
func ratioHeader(names []string) []string {
	if slices.Equal(names, []string{Engine, Reference}) {
		return []string{"engine/ref"}
	}
	return nil
}

// ratioCells is the engine/reference ratio when both ran.
func ratioCells(names []string, vals []float64) []string {
	if len(ratioHeader(names)) == 0 {
		return nil
	}
	if vals[1] == 0 {
		return []string{"-"}
	}
	return []string{fmt.Sprintf("%.2fx", vals[0]/vals[1])}
}
