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
	fmt.Fprintln(w, "Heap of round 1 after a garbage collection at the end of the run (after the last phase's usage was read), from the")
	fmt.Fprintln(w, "controller's /debug/pprof/heap: the live heap is the runtime's exact HeapAlloc, per parent all of it over N; the sites")
	fmt.Fprintln(w, "are the profile's in-use bytes by the function that allocated them (flat), an estimate: the runtime samples about")
	fmt.Fprintln(w, "one allocation per 512 KiB allocated, so a small heap's sites are coarse.")
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
		fmt.Fprintf(w, "%s (%s): live heap %.1f MiB (HeapAlloc), %.1f KiB per parent; the profile's sites sum to %.1f MiB.\n\n",
			name, filepath.Base(h.path), float64(h.heapAlloc)/(1<<20), perParentKiB(h.heapAlloc, r.cfg.N), float64(h.inuse)/(1<<20))
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
