package harness

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/google/pprof/profile"
)

// heapTop is how many allocation sites the report lists per controller.
const heapTop = 12

// heapSummary is what the report says of one heap profile.
type heapSummary struct {
	path  string // the profile, in the log directory
	inuse int64  // bytes in use, as the sampled profile estimates them
	// heapAlloc is the runtime's exact count of bytes in live heap
	// objects (runtime.MemStats.HeapAlloc) at about the same time.
	heapAlloc int64
	top       []heapSite
}

// heapSite is one allocation site: the function that allocated, and the
// bytes in use it allocated itself (flat).
type heapSite struct {
	function string
	inuse    int64
}

// heapProfile reads the heap profile of the controller whose profiler
// listens on addr, after a garbage collection (so in-use is current),
// writes it to path and summarises it.
func (h *Harness) heapProfile(ctx context.Context, addr, path string) (*heapSummary, error) {
	raw, err := fetchHeapProfile(ctx, "http://"+addr+"/debug/pprof/heap?gc=1")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		return nil, fmt.Errorf("writing the heap profile: %w", err)
	}
	sum, err := summariseHeap(raw, heapTop)
	if err != nil {
		return nil, err
	}
	sum.path = path
	// The text form ends with the runtime's MemStats: the exact live
	// heap beside the profile's estimate.
	text, err := fetchHeapProfile(ctx, "http://"+addr+"/debug/pprof/heap?gc=1&debug=1")
	if err != nil {
		return nil, err
	}
	if sum.heapAlloc, err = parseMemStat(text, "HeapAlloc"); err != nil {
		return nil, err
	}
	h.log.printf("  heap profile %s: %.1f MiB in use (HeapAlloc %.1f MiB)", filepath.Base(path),
		float64(sum.inuse)/(1<<20), float64(sum.heapAlloc)/(1<<20))
	return sum, nil
}

// parseMemStat returns one field of the "# runtime.MemStats" block that
// ends the text form (debug=1) of a Go heap profile.
func parseMemStat(text []byte, field string) (int64, error) {
	prefix := "# " + field + " = "
	for line := range strings.Lines(string(text)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("malformed %s in the heap profile: %w", field, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("no %s in the heap profile's MemStats", field)
}

// fetchHeapProfile reads a profile over HTTP.
func fetchHeapProfile(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading the heap profile: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading the heap profile: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("reading the heap profile: %s", resp.Status)
	}
	return raw, nil
}

// summariseHeap parses a Go heap profile and returns its in-use bytes and
// the top allocation sites by in-use bytes allocated there (flat: the
// innermost function of each sample's stack, inlined frames included).
func summariseHeap(raw []byte, top int) (*heapSummary, error) {
	p, err := profile.Parse(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parsing the heap profile: %w", err)
	}
	idx := slices.IndexFunc(p.SampleType, func(t *profile.ValueType) bool { return t.Type == "inuse_space" })
	if idx < 0 {
		return nil, fmt.Errorf("parsing the heap profile: no inuse_space samples")
	}
	sum := &heapSummary{}
	bySite := map[string]int64{}
	for _, s := range p.Sample {
		v := s.Value[idx]
		sum.inuse += v
		bySite[flatFunction(s)] += v
	}
	for f, v := range bySite {
		if v > 0 {
			sum.top = append(sum.top, heapSite{function: f, inuse: v})
		}
	}
	slices.SortFunc(sum.top, func(a, b heapSite) int {
		return cmp.Or(cmp.Compare(b.inuse, a.inuse), strings.Compare(a.function, b.function))
	})
	if len(sum.top) > top {
		sum.top = sum.top[:top]
	}
	return sum, nil
}

// flatFunction names the innermost function of a sample's stack, its
// package path shortened.
func flatFunction(s *profile.Sample) string {
	if len(s.Location) == 0 || len(s.Location[0].Line) == 0 || s.Location[0].Line[0].Function == nil {
		return "?"
	}
	return shortFunction(s.Location[0].Line[0].Function.Name)
}

// shortFunction drops the directories of a function's package path and
// its type arguments: "k8s.io/client-go/tools/cache.(*threadSafeMap).Add"
// becomes "cache.(*threadSafeMap).Add", "buffer.NewRing[go.shape.int]"
// "buffer.NewRing[...]". A version as the last element keeps the one
// before it: "k8s.io/api/core/v1.init" becomes "core/v1.init".
func shortFunction(name string) string {
	name = elideTypeArguments(name)
	pkg := name
	if i := strings.IndexAny(name, "(["); i >= 0 {
		pkg = name[:i]
	}
	slash := strings.LastIndexByte(pkg, '/')
	if slash > 0 && isVersion(pkg[slash+1:]) {
		slash = strings.LastIndexByte(pkg[:slash], '/')
	}
	return name[slash+1:]
}

// isVersion reports whether a package name's element, up to the first
// dot, is an API version such as v1 or v1beta1.
func isVersion(elem string) bool {
	elem, _, _ = strings.Cut(elem, ".")
	return len(elem) >= 2 && elem[0] == 'v' && elem[1] >= '0' && elem[1] <= '9'
}

// elideTypeArguments replaces each outermost [...] of a function name
// with "[...]".
func elideTypeArguments(name string) string {
	var b strings.Builder
	depth := 0
	for _, r := range name {
		switch {
		case r == '[':
			if depth == 0 {
				b.WriteString("[...]")
			}
			depth++
		case r == ']' && depth > 0:
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return b.String()
}
