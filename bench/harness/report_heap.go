package harness

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
)

// memoryProfiles prints, for round 1 of each controller that serves a
// heap profile, its in-use heap and top allocation sites.
func (r *Report) memoryProfiles(w io.Writer) {
	fmt.Fprintln(w, "### Memory profile")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "In-use heap of round 1 after a garbage collection at the end of the run (after the last phase's usage was read),")
	fmt.Fprintln(w, "from the controller's /debug/pprof/heap; per parent is all of it over N; sites are flat (what the function allocated")
	fmt.Fprintln(w, "itself). The runtime samples about one allocation per 512 KiB allocated, so a small heap's sites are coarse.")
	fmt.Fprintln(w)
	var none []string
	for _, name := range r.controllers() {
		res := r.find(name, 1)
		if res == nil {
			continue
		}
		if res.heap == nil {
			none = append(none, fmt.Sprintf("- %s: %s.", name, noProfileReason(name)))
			continue
		}
		h := res.heap
		fmt.Fprintf(w, "%s (%s): %.1f MiB in use, %.1f KiB per parent.\n\n", name, filepath.Base(h.path),
			float64(h.inuse)/(1<<20), perParentKiB(h.inuse, r.cfg.N))
		heapTable(h).write(w)
		fmt.Fprintln(w)
	}
	if len(none) > 0 {
		fmt.Fprintln(w, strings.Join(none, "\n"))
		fmt.Fprintln(w)
	}
}

// noProfileReason says why a controller has no heap profile.
func noProfileReason(name string) string {
	switch name {
	case Kro, KroDefaults:
		return "no profile: kro serves /debug/pprof only when built with the pprof build tag, and bin/kro is built without it"
	}
	if name == Engine {
		return "no profile (this engine build has no --pprof-bind-address, or no port was free for it)"
	}
	return "no profile (no free port for its profiler)"
}

// heapTable lists a profile's top sites.
func heapTable(h *heapSummary) *table {
	t := &table{header: []string{"in-use MiB", "share", "allocated in"}}
	for _, s := range h.top {
		share := "-"
		if h.inuse > 0 {
			share = fmt.Sprintf("%.1f%%", 100*float64(s.inuse)/float64(h.inuse))
		}
		t.add([]string{fmt.Sprintf("%.2f", float64(s.inuse)/(1<<20)), share, s.function})
	}
	return t
}
