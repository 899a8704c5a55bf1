package harness

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// runResult is what one controller run measured.
type runResult struct {
	controller string
	round      int
	phases     map[string]time.Duration // phase key -> time to the goal
	skipped    map[string]string        // phase key -> why it is n/a
	requests   map[string]counts        // phase key -> controller requests
	parents    map[string]int           // phase key -> parents affected
	phaseCPU   map[string]time.Duration // phase key -> controller CPU time
	busy       map[string]time.Duration // phase key -> time to the last watched change
	cpu        time.Duration            // CPU time from start to the end of (d)
	rss        int64                    // peak RSS at the end of (d), bytes (summed over processes)
	anon       int64                    // peak anonymous RSS at the end of (d), bytes (summed over processes)
	use        []usage                  // per process, at the end of (d)
	replicas   []replicaResult          // per replica of a sharded run
	cpuEnd     time.Duration            // CPU time at the end of the run
	rssEnd     int64                    // peak RSS at the end of the run
	// evaluations are the engine's template evaluations to the end of (d).
	evaluations evaluationCounts
	// startup is the time from the exec of the controller until the
	// harness saw the warm-up parent's Deployment.
	startup time.Duration
	// warm is the usage once the controller settled after the warm-up
	// (summed over processes).
	warm usage
	// controlPlaneCPU is etcd's and the kube-apiserver's CPU time per
	// phase key, until the controller settled; empty when not measured.
	controlPlaneCPU map[string]time.Duration
	// heap summarises the heap profile read at the end of the run; nil
	// when the controller serves none.
	heap *heapSummary
}

// comparedPhases are the phases both controllers run, whose requests and
// usage are compared.
var comparedPhases = []string{phaseCreate, phaseStatus, phaseRecreate, phaseScale}

// requestsAD sums the controller's requests over phases (a) to (d).
func (r *runResult) requestsAD() counts {
	out := counts{}
	for _, k := range comparedPhases {
		for key, v := range r.requests[k] {
			out[key] += v
		}
	}
	return out
}

// controlPlaneAD sums etcd's and the kube-apiserver's CPU time over phases
// (a) to (d); false when a phase's was not measured.
func (r *runResult) controlPlaneAD() (time.Duration, bool) {
	var sum time.Duration
	for _, k := range comparedPhases {
		d, ok := r.controlPlaneCPU[k]
		if !ok {
			return 0, false
		}
		sum += d
	}
	return sum, true
}

// perParentKiB divides bytes over n parents, in KiB.
func perParentKiB(bytes int64, n int) float64 {
	return float64(bytes) / 1024 / float64(n)
}

// Report is the outcome of a benchmark invocation.
type Report struct {
	cfg       Config
	Runs      []*runResult
	Raw       []time.Duration
	LoadStart string
	LoadEnd   string
	// KroVersion is the version of kro the peer runs used, if any.
	KroVersion string
	// Scale holds the scale benchmark's runs (Config.Scale).
	Scale []*scaleResult
}

func newReport(cfg Config) *Report {
	return &Report{cfg: cfg, LoadStart: loadAverage()}
}

// targets are the goals for engine/reference, per row.
var targets = map[string]string{
	phaseCreate: "<= 1.2x", phaseStatus: "<= 1.3x", phaseRecreate: "<= 1.2x", phaseScale: "<= 1.2x",
	"cpu": "<= 1.5x", "rss": "<= 1.5x", "writes": "<= 1.0x",
}

// Write prints the report as Markdown tables.
func (r *Report) Write(w io.Writer) {
	if len(r.cfg.Shards) > 0 {
		r.writeSharding(w)
		return
	}
	if r.cfg.Scale {
		r.writeScale(w)
		return
	}
	c := r.cfg
	fmt.Fprintf(w, "## %s: N=%d MyKinds, %d reconcile workers, %d harness clients, %d round(s)\n\n",
		strings.Join(r.controllers(), " vs "), c.N, c.Workers, c.Clients, c.Rounds)
	fmt.Fprintf(w, "Bare control plane (etcd + kube-apiserver), a fresh one per controller run; the harness plays the\n"+
		"Deployment controller. Times are medians over rounds, from the first request of a phase until the\n"+
		"harness's informers saw the goal. Load average before: %s, after: %s.\n\n", r.LoadStart, r.LoadEnd)
	r.summary().write(w)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Per phase, "+strings.Join(r.controllers(), " / ")+", until the controller settled (medians over rounds; busy = phase start to the")
	fmt.Fprintln(w, "last change the harness saw on a MyKind or Deployment, including status writes after the goal):")
	fmt.Fprintln(w)
	r.perPhase().write(w)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Controller requests per affected parent, by verb and resource and phase (median over rounds; watches excluded; . is none):\n\n")
	r.requestBreakdown().write(w)
	fmt.Fprintln(w)
	r.memoryProfiles(w)
	r.notes(w)
}

// controllers returns the controllers of the report, in column order.
func (r *Report) controllers() []string {
	var out []string
	for _, name := range controllerOrder {
		if slices.Contains(r.cfg.Controllers, name) {
			out = append(out, name)
		}
	}
	return out
}

// compared returns the controllers with a ratio to the reference, and the
// ones with a per-round column (the engine and kro with as many workers).
func (r *Report) compared() (ratios, perRound []string) {
	if !slices.Contains(r.cfg.Controllers, Reference) {
		return nil, nil
	}
	for _, name := range r.controllers() {
		if name == Reference {
			continue
		}
		ratios = append(ratios, name)
		if name != KroDefaults {
			perRound = append(perRound, name)
		}
	}
	return ratios, perRound
}

// summary is the main side-by-side table.
func (r *Report) summary() *table {
	t := &table{header: []string{"metric"}}
	t.header = append(t.header, r.controllers()...)
	t.header = append(t.header, "raw limit")
	ratios, perRound := r.compared()
	for _, name := range ratios {
		t.header = append(t.header, shortName(name)+"/ref")
	}
	for _, name := range perRound {
		t.header = append(t.header, "per round ("+shortName(name)+"/ref)")
	}
	t.header = append(t.header, "target (engine/ref)")
	for _, k := range []string{phaseCreate, phaseStatus, phaseRecreate, phaseScale, phaseReload} {
		get := func(res *runResult) (float64, bool) {
			d, ok := res.phases[k]
			return d.Seconds(), ok
		}
		raw := ""
		if k == phaseCreate && len(r.Raw) > 0 {
			raw = seconds(median(durations(r.Raw)))
		}
		t.add(r.row(phaseTitles[k], get, seconds, raw, targets[k]))
	}
	t.add(r.row("start until first child s (process start -> warm-up Deployment)", func(res *runResult) (float64, bool) {
		return res.startup.Seconds(), res.startup > 0
	}, seconds, "", ""))
	t.add(r.row("CPU s, start to end of (d)", func(res *runResult) (float64, bool) {
		return res.cpu.Seconds(), true
	}, func(v float64) string { return fmt.Sprintf("%.1f", v) }, "", targets["cpu"]))
	t.add(r.row("peak RSS MiB at end of (d)", func(res *runResult) (float64, bool) {
		return float64(res.rss) / (1 << 20), true
	}, func(v float64) string { return fmt.Sprintf("%.0f", v) }, "", targets["rss"]))
	t.add(r.row("peak anonymous RSS MiB (heap, stacks), to end of (d)", func(res *runResult) (float64, bool) {
		return float64(res.anon) / (1 << 20), true
	}, func(v float64) string { return fmt.Sprintf("%.0f", v) }, "", ""))
	t.add(r.row("peak RSS growth per parent KiB, (end of (d) - after warm-up) / N", func(res *runResult) (float64, bool) {
		return perParentKiB(res.rss-res.warm.rss, r.cfg.N), res.warm.rss > 0
	}, func(v float64) string { return fmt.Sprintf("%.1f", v) }, "", ""))
	t.add(r.row("peak anonymous RSS growth per parent KiB, (end of (d) - after warm-up) / N", func(res *runResult) (float64, bool) {
		return perParentKiB(res.anon-res.warm.anon, r.cfg.N), res.warm.anon > 0
	}, func(v float64) string { return fmt.Sprintf("%.1f", v) }, "", ""))
	t.add(r.row("control plane CPU s, (a)-(d)", func(res *runResult) (float64, bool) {
		d, ok := res.controlPlaneAD()
		return d.Seconds(), ok
	}, func(v float64) string { return fmt.Sprintf("%.1f", v) }, "", ""))
	t.add(r.row("template evaluations, start to end of (d)", func(res *runResult) (float64, bool) {
		return res.evaluations.total, res.evaluations.total > 0
	}, func(v float64) string { return fmt.Sprintf("%.0f", v) }, "", ""))
	t.add(r.row("writes per parent, (a)-(d)", func(res *runResult) (float64, bool) {
		return res.requestsAD().writes() / float64(r.cfg.N), true
	}, func(v float64) string { return fmt.Sprintf("%.2f", v) }, "", targets["writes"]))
	return t
}

// shortName abbreviates a controller name for ratio headers.
func shortName(name string) string {
	if name == Reference {
		return "ref"
	}
	return name
}

// row builds one summary row: each controller's median, the ratios of the
// medians to the reference's, and the per-round ratios.
func (r *Report) row(title string, get func(*runResult) (float64, bool), format func(float64) string, raw, target string) []string {
	cells := []string{title}
	med := map[string]float64{}
	for _, name := range r.controllers() {
		vals, why := r.values(name, get)
		if len(vals) == 0 {
			cells = append(cells, why)
			continue
		}
		med[name] = median(vals)
		cells = append(cells, format(med[name]))
	}
	cells = append(cells, raw)
	ratios, perRound := r.compared()
	for _, name := range ratios {
		cells = append(cells, ratio(med[name], med[Reference]))
	}
	for _, name := range perRound {
		cells = append(cells, strings.Join(r.roundRatios(name, get), " "))
	}
	return append(cells, target)
}

// values returns a controller's measurements over the rounds, or why there
// are none.
func (r *Report) values(name string, get func(*runResult) (float64, bool)) ([]float64, string) {
	var vals []float64
	why := "-"
	for _, res := range r.Runs {
		if res.controller != name {
			continue
		}
		if v, ok := get(res); ok {
			vals = append(vals, v)
		} else if len(res.skipped) > 0 {
			why = "n/a"
		}
	}
	return vals, why
}

// roundRatios returns name/reference for each round that ran both.
func (r *Report) roundRatios(name string, get func(*runResult) (float64, bool)) []string {
	var out []string
	for round := 1; round <= r.cfg.Rounds; round++ {
		c, ref := r.find(name, round), r.find(Reference, round)
		if c == nil || ref == nil {
			continue
		}
		cv, cok := get(c)
		rv, rok := get(ref)
		if cok && rok {
			out = append(out, ratio(cv, rv))
		}
	}
	return out
}

// find returns a controller's run of a round.
func (r *Report) find(name string, round int) *runResult {
	for _, res := range r.Runs {
		if res.controller == name && res.round == round {
			return res
		}
	}
	return nil
}

// perPhase tabulates, for each phase, the controllers' writes per affected
// parent, CPU time until they settled, and busy time: from the start of the
// phase to the last change to a watched MyKind or Deployment, which
// includes work done after the goal was reached (status writes).
func (r *Report) perPhase() *table {
	names := strings.Join(r.controllers(), " / ")
	t := &table{header: []string{"phase", "parents", "writes per parent, " + names, "CPU s, " + names,
		"control plane CPU s, " + names, "busy s, " + names}}
	for _, k := range []string{phaseCreate, phaseStatus, phaseRecreate, phaseScale, phaseReload} {
		row := []string{phaseTitles[k], ""}
		cols := map[string][]string{}
		for _, name := range r.controllers() {
			var writes, cpu, cp, busy []float64
			for _, res := range r.Runs {
				if res.controller == name && res.parents[k] > 0 {
					writes = append(writes, res.requests[k].writes()/float64(res.parents[k]))
					cpu = append(cpu, res.phaseCPU[k].Seconds())
					if d, ok := res.controlPlaneCPU[k]; ok {
						cp = append(cp, d.Seconds())
					}
					busy = append(busy, res.busy[k].Seconds())
					row[1] = fmt.Sprint(res.parents[k])
				}
			}
			cols["writes"] = append(cols["writes"], formatOr(writes, "%.2f"))
			cols["cpu"] = append(cols["cpu"], formatOr(cpu, "%.2f"))
			cols["cp"] = append(cols["cp"], formatOr(cp, "%.2f"))
			cols["busy"] = append(cols["busy"], formatOr(busy, "%.2f"))
		}
		for _, c := range []string{"writes", "cpu", "cp", "busy"} {
			row = append(row, strings.Join(cols[c], " / "))
		}
		t.add(row)
	}
	return t
}

// requestBreakdown tabulates the controllers' requests per affected parent
// by verb and resource, for each phase.
func (r *Report) requestBreakdown() *table {
	keys := map[string]bool{}
	for _, res := range r.Runs {
		for _, c := range res.requests {
			for k := range c {
				keys[k] = true
			}
		}
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Slice(sorted, func(i, j int) bool { return requestLess(sorted[i], sorted[j]) })
	t := &table{header: []string{"request"}}
	type column struct{ controller, phase string }
	var cols []column
	for _, name := range r.controllers() {
		for _, k := range []string{phaseCreate, phaseStatus, phaseRecreate, phaseScale, phaseReload} {
			if r.ran(name, k) {
				cols = append(cols, column{name, k})
				t.header = append(t.header, fmt.Sprintf("%s (%s)", name, k))
			}
		}
	}
	for _, key := range sorted {
		row := []string{key}
		for _, c := range cols {
			var vals []float64
			for _, res := range r.Runs {
				if res.controller == c.controller && res.parents[c.phase] > 0 {
					vals = append(vals, res.requests[c.phase][key]/float64(res.parents[c.phase]))
				}
			}
			cell := formatOr(vals, "%.2f")
			if cell == "0.00" {
				cell = "."
			}
			row = append(row, cell)
		}
		t.add(row)
	}
	return t
}

// ran reports whether a controller completed a phase in some round.
func (r *Report) ran(name, phase string) bool {
	for _, res := range r.Runs {
		if res.controller == name && res.parents[phase] > 0 {
			return true
		}
	}
	return false
}

// requestLess orders writes before reads, then by resource and verb.
func requestLess(a, b string) bool {
	va, ra := splitKey(a)
	vb, rb := splitKey(b)
	if writeVerbs[va] != writeVerbs[vb] {
		return writeVerbs[va]
	}
	if ra != rb {
		return ra < rb
	}
	return va < vb
}

// notes prints what the tables do not show.
func (r *Report) notes(w io.Writer) {
	for _, res := range r.Runs {
		for k, why := range res.skipped {
			fmt.Fprintf(w, "- %s round %d: phase (%s) n/a: %s.\n", res.controller, res.round, k, why)
		}
		if e := res.evaluations; e.total > 0 {
			fmt.Fprintf(w, "- %s round %d: %.0f template evaluations to the end of (d) (%.2f per parent), %.0f of them answered by the template's memory.\n",
				res.controller, res.round, e.total, e.total/float64(r.cfg.N), e.remembered)
		}
		if len(res.skipped) == 0 && res.phases[phaseReload] > 0 {
			fmt.Fprintf(w, "- %s round %d after (e): CPU %.1f s, peak RSS %.0f MiB.\n",
				res.controller, res.round, res.cpuEnd.Seconds(), float64(res.rssEnd)/(1<<20))
		}
	}
	if r.KroVersion != "" {
		fmt.Fprintln(w, "- Start-up: the engine's and the reference's warm-up MyKind exists (its CRD installed) before their process starts; kro's MyKind CRD exists only once "+
			"kro made its ResourceGraphDefinition Active, so kro's start-up runs from its exec through creating the ResourceGraphDefinition, waiting until it is Active "+
			"and its MyKind served, and creating the warm-up MyKind, to the warm-up Deployment.")
		fmt.Fprintf(w, "- kro is %s built from its Go module (hack/tools/kro) on its own control plane with the ResourceGraphDefinition of bench/harness/kro-mykind.yaml; "+
			"kro runs with --dynamic-controller-concurrent-reconciles %d; kro-defaults, if run, with kro's defaults (1 worker, client QPS 100, burst 150).\n", r.KroVersion, r.cfg.Workers)
	}
	fmt.Fprintln(w, "- CPU and peak RSS are the controller process's with its child processes' (the engine's provider plugins) added (/proc/<pid>/stat utime+stime, /proc/<pid>/status VmHWM), including start-up and a one-parent warm-up.")
	fmt.Fprintln(w, "- RSS growth per parent: the peak at the end of (d) minus the peak once the controller settled after the warm-up, over N; what a large N states per parent.")
	fmt.Fprintln(w, "- Control plane CPU: etcd's and the kube-apiserver's utime+stime over each phase until the controller settled; they share the machine's cores with the controller.")
	fmt.Fprintln(w, "- Requests are the apiserver's apiserver_request_total deltas on mykinds, deployments and events, minus the harness's own requests (counted client-side).")
}

// table is a Markdown table with padded columns.
type table struct {
	header []string
	rows   [][]string
}

func (t *table) add(row []string) { t.rows = append(t.rows, row) }

// write prints the table.
func (t *table) write(w io.Writer) {
	widths := make([]int, len(t.header))
	for _, row := range append([][]string{t.header}, t.rows...) {
		for i, cell := range row {
			widths[i] = max(widths[i], utf8.RuneCountInString(cell))
		}
	}
	line := func(row []string) {
		var b strings.Builder
		for i, cell := range row {
			fmt.Fprintf(&b, "| %s%s ", cell, strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell)))
		}
		fmt.Fprintln(w, b.String()+"|")
	}
	line(t.header)
	sep := make([]string, len(widths))
	for i, n := range widths {
		sep[i] = strings.Repeat("-", n)
	}
	line(sep)
	for _, row := range t.rows {
		line(row)
	}
}

// median returns the median of vals (0 for none).
func median(vals []float64) float64 {
	if len(vals) == 0 {
		return 0
	}
	s := append([]float64(nil), vals...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// durations converts to seconds.
func durations(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = d.Seconds()
	}
	return out
}

// seconds formats a number of seconds.
func seconds(v float64) string { return fmt.Sprintf("%.2fs", v) }

// ratio formats a/b, or "-" when either is missing.
func ratio(a, b float64) string {
	if a == 0 || b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

// formatOr formats the median of vals, or "-" when there are none.
func formatOr(vals []float64, format string) string {
	if len(vals) == 0 {
		return "-"
	}
	return fmt.Sprintf(format, median(vals))
}
