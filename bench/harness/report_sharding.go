package harness

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// mib is a mebibyte, for RSS figures.
const mib = 1 << 20

// writeSharding prints the report of the sharding benchmark
// (Config.Shards).
func (r *Report) writeSharding(w io.Writer) {
	c := r.cfg
	counts := make([]string, len(c.Shards))
	for i, n := range c.Shards {
		counts[i] = fmt.Sprint(n)
	}
	fmt.Fprintf(w, "## Sharding: N=%d MyKinds over %s replica(s), %d reconcile workers per replica, %d harness clients, %d round(s)\n\n",
		c.N, strings.Join(counts, " and "), c.Workers, c.Clients, c.Rounds)
	fmt.Fprintf(w, "Bare control plane (etcd + kube-apiserver), a fresh one per run; the harness plays the Deployment controller.\n"+
		"`engine` is one engine process without sharding; a run of K replicas is K engine processes with `--sharding`\n"+
		"(also K=1, so that 1 against more compares like with like), the elected one the sharder. Times are medians over\n"+
		"rounds, from the first request of a phase until the harness's informers saw the goal. Load average before: %s,\n"+
		"after: %s.\n\n", r.LoadStart, r.LoadEnd)
	r.shardingSummary().write(w)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Per replica, at the end of (d) (parents: the MyKinds labelled with its shard):")
	fmt.Fprintln(w)
	r.replicaTable().write(w)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Requests of all replicas over (a)-(d), by verb and resource (medians over rounds; watches excluded; . is none):")
	fmt.Fprintln(w)
	r.requestTotals().write(w)
	fmt.Fprintln(w)
	r.growth(w)
	r.shardingNotes(w)
}

// requestTotals tabulates each run's requests over phases (a) to (d).
func (r *Report) requestTotals() *table {
	keys := map[string]bool{}
	for _, res := range r.Runs {
		for k := range res.requestsAD() {
			keys[k] = true
		}
	}
	sorted := slices.SortedFunc(maps.Keys(keys), func(a, b string) int {
		if requestLess(a, b) {
			return -1
		}
		return 1
	})
	t := &table{header: []string{"request"}}
	for _, name := range r.cfg.Controllers {
		t.header = append(t.header, runTitle(name))
	}
	for _, key := range sorted {
		row := []string{key}
		for _, name := range r.cfg.Controllers {
			vals, why := r.values(name, func(res *runResult) (float64, bool) { return res.requestsAD()[key], res.parents[phaseScale] > 0 })
			cell := formatOrWhy(vals, "%.0f", why)
			if cell == "0" {
				cell = "."
			}
			row = append(row, cell)
		}
		t.add(row)
	}
	return t
}

// runTitle is a run's column title.
func runTitle(name string) string {
	n, ok := shardCount(name)
	switch {
	case !ok:
		return name + ", no sharding"
	case n == 1:
		return "1 replica, sharded"
	}
	return fmt.Sprintf("%d replicas", n)
}

// perReplica is a sharded run's figures per replica (the engine without
// sharding is one replica holding every parent).
type perReplica struct {
	meanRSS, maxRSS     float64 // MiB
	meanParents, maxPar float64
}

// replicaFigures returns a run's figures per replica.
func replicaFigures(res *runResult, n int) perReplica {
	var f perReplica
	for _, u := range res.use {
		rss := float64(u.rss) / mib
		f.meanRSS += rss / float64(len(res.use))
		f.maxRSS = max(f.maxRSS, rss)
	}
	if len(res.replicas) == 0 {
		f.meanParents, f.maxPar = float64(n), float64(n)
		return f
	}
	for _, rep := range res.replicas {
		f.meanParents += float64(rep.parents) / float64(len(res.replicas))
		f.maxPar = max(f.maxPar, float64(rep.parents))
	}
	return f
}

// shardingRow is a row of the sharding summary: a title, the figure of a
// run, and its format.
type shardingRow struct {
	title  string
	get    func(*runResult) float64
	format string
}

// shardingRows are the summary's rows after the phases.
func (r *Report) shardingRows() []shardingRow {
	n := r.cfg.N
	return []shardingRow{
		{"(a)+(b) create and converge, s", func(res *runResult) float64 {
			return (res.phases[phaseCreate] + res.phases[phaseStatus]).Seconds()
		}, "%.2f"},
		{"parents per replica, mean", func(res *runResult) float64 { return replicaFigures(res, n).meanParents }, "%.0f"},
		{"parents per replica, most", func(res *runResult) float64 { return replicaFigures(res, n).maxPar }, "%.0f"},
		{"peak RSS MiB per replica, mean", func(res *runResult) float64 { return replicaFigures(res, n).meanRSS }, "%.0f"},
		{"peak RSS MiB per replica, largest", func(res *runResult) float64 { return replicaFigures(res, n).maxRSS }, "%.0f"},
		{"peak RSS MiB, sum over replicas", func(res *runResult) float64 { return float64(res.rss) / mib }, "%.0f"},
		{"CPU s, all replicas, start to end of (d)", func(res *runResult) float64 { return res.cpu.Seconds() }, "%.1f"},
		{"writes per parent, (a)-(d)", func(res *runResult) float64 { return res.requestsAD().writes() / float64(n) }, "%.2f"},
	}
}

// shardingSummary tabulates each run's phase times and totals.
func (r *Report) shardingSummary() *table {
	t := &table{header: []string{"metric"}}
	for _, name := range r.cfg.Controllers {
		t.header = append(t.header, runTitle(name))
	}
	for _, k := range comparedPhases {
		row := []string{phaseTitles[k] + ", s"}
		for _, name := range r.cfg.Controllers {
			vals, why := r.values(name, func(res *runResult) (float64, bool) {
				d, ok := res.phases[k]
				return d.Seconds(), ok
			})
			row = append(row, formatOrWhy(vals, "%.2f", why))
		}
		t.add(row)
	}
	for _, m := range r.shardingRows() {
		row := []string{m.title}
		for _, name := range r.cfg.Controllers {
			vals, why := r.values(name, func(res *runResult) (float64, bool) { return m.get(res), res.parents[phaseScale] > 0 })
			row = append(row, formatOrWhy(vals, m.format, why))
		}
		t.add(row)
	}
	return t
}

// formatOrWhy formats the median of vals, or says why there are none.
func formatOrWhy(vals []float64, format, why string) string {
	if len(vals) == 0 {
		return why
	}
	return fmt.Sprintf(format, median(vals))
}

// replicaTable lists every replica of every run.
func (r *Report) replicaTable() *table {
	t := &table{header: []string{"run", "round", "replica", "sharder", "parents", "peak RSS MiB", "CPU s"}}
	for _, res := range r.Runs {
		if len(res.replicas) == 0 && len(res.use) == 1 {
			t.add([]string{runTitle(res.controller), fmt.Sprint(res.round), "-", "-", fmt.Sprint(r.cfg.N),
				fmt.Sprintf("%.0f", float64(res.use[0].rss)/mib), fmt.Sprintf("%.1f", res.use[0].cpu.Seconds())})
		}
		for _, rep := range res.replicas {
			sharder := ""
			if rep.sharder {
				sharder = "yes"
			}
			t.add([]string{runTitle(res.controller), fmt.Sprint(res.round), rep.shard, sharder, fmt.Sprint(rep.parents),
				fmt.Sprintf("%.0f", float64(rep.rss)/mib), fmt.Sprintf("%.1f", rep.cpu.Seconds())})
		}
	}
	return t
}

// growth prints, from the fewest replicas to each larger count, the ratio
// of the medians: RSS per replica, total RSS and CPU, and the phase times;
// then the line fitted through the replicas' RSS against their parents.
func (r *Report) growth(w io.Writer) {
	first := shardedPrefix + fmt.Sprint(slices.Min(r.cfg.Shards))
	med := func(name string, get func(*runResult) float64) float64 {
		vals, _ := r.values(name, func(res *runResult) (float64, bool) { return get(res), res.parents[phaseScale] > 0 })
		return median(vals)
	}
	n := r.cfg.N
	for _, name := range r.cfg.Controllers {
		if !isSharded(name) || name == first {
			continue
		}
		ratioOf := func(get func(*runResult) float64) string { return ratio(med(name, get), med(first, get)) }
		fmt.Fprintf(w, "- Growth from %s to %s: peak RSS per replica %s (mean), %s (largest); RSS summed %s; CPU summed %s; (a) %s, (b) %s.\n",
			runTitle(first), runTitle(name),
			ratioOf(func(res *runResult) float64 { return replicaFigures(res, n).meanRSS }),
			ratioOf(func(res *runResult) float64 { return replicaFigures(res, n).maxRSS }),
			ratioOf(func(res *runResult) float64 { return float64(res.rss) }),
			ratioOf(func(res *runResult) float64 { return res.cpu.Seconds() }),
			ratioOf(func(res *runResult) float64 { return res.phases[phaseCreate].Seconds() }),
			ratioOf(func(res *runResult) float64 { return res.phases[phaseStatus].Seconds() }))
	}
	var parents, rss []float64
	for _, res := range r.Runs {
		for _, rep := range res.replicas {
			parents, rss = append(parents, float64(rep.parents)), append(rss, float64(rep.rss)/mib)
		}
	}
	base, slope, ok := fitLine(parents, rss)
	if !ok {
		return
	}
	fmt.Fprintf(w, "- Peak RSS against parents held, least squares over the %d replicas of the sharded runs: %.0f MiB + %.1f KiB per parent",
		len(parents), base, slope*1024)
	if slope > 0 && base < 1024 {
		fmt.Fprintf(w, "; 1 GiB holds about %.0f parents per replica", (1024-base)/slope)
	}
	fmt.Fprintln(w, " (the sharder also holds every parent's metadata).")
}

// fitLine fits y = base + slope*x by least squares; ok is false when the
// xs do not take two values.
func fitLine(xs, ys []float64) (base, slope float64, ok bool) {
	if len(xs) < 2 || len(xs) != len(ys) {
		return 0, 0, false
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i] / float64(len(xs))
		my += ys[i] / float64(len(xs))
	}
	var sxx, sxy float64
	for i := range xs {
		sxx += (xs[i] - mx) * (xs[i] - mx)
		sxy += (xs[i] - mx) * (ys[i] - my)
	}
	if sxx == 0 {
		return 0, 0, false
	}
	slope = sxy / sxx
	return my - slope*mx, slope, true
}

// shardingNotes prints how the sharding benchmark ran.
func (r *Report) shardingNotes(w io.Writer) {
	if len(r.Raw) > 0 {
		fmt.Fprintf(w, "- Raw limit for (a), the harness creating the N Deployments itself: %s.\n", seconds(median(durations(r.Raw))))
	}
	fmt.Fprintf(w, "- Each replica: `engine run --sharding --shard-id engine-<i> --leader-election-id %s --leader-election-namespace %s "+
		"--revision-namespace %s %s --max-concurrent-reconciles %d`; no metrics or probe ports.\n",
		shardGroup, shardNamespace, shardNamespace, strings.Join(shardLeaseArgs, " "), r.cfg.Workers)
	fmt.Fprintln(w, "- The harness waits for every replica's shard Lease before the warm-up parent, so the sharder places the workload over all of them.")
	fmt.Fprintln(w, "- CPU and peak RSS are each process's (/proc/<pid>/stat utime+stime, /proc/<pid>/status VmHWM), including start-up and a one-parent warm-up; "+
		"the sum of the replicas' peaks bounds the peak of their sum.")
	fmt.Fprintln(w, "- Writes are the apiserver's apiserver_request_total deltas on mykinds, deployments and events, minus the harness's own; under sharding they include the sharder's label writes.")
}
