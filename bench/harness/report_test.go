package harness

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reportFixture is one round of the engine and the reference, N=1000.
func reportFixture() *Report {
	run := func(name string, startup time.Duration, warm, end usage, cp time.Duration) *runResult {
		return &runResult{controller: name, round: 1, startup: startup, warm: warm,
			cpu: end.cpu, rss: end.rss, anon: end.anon,
			phases: map[string]time.Duration{}, skipped: map[string]string{}, requests: map[string]counts{},
			parents:  map[string]int{phaseCreate: 1000, phaseStatus: 1000, phaseRecreate: 100, phaseScale: 100},
			phaseCPU: map[string]time.Duration{}, busy: map[string]time.Duration{},
			controlPlaneCPU: map[string]time.Duration{
				phaseCreate: cp, phaseStatus: cp / 2, phaseRecreate: cp / 4, phaseScale: cp / 4,
			}}
	}
	return &Report{
		cfg: Config{N: 1000, Rounds: 1, Controllers: []string{Engine, Reference}},
		Runs: []*runResult{
			run(Engine, 1240*time.Millisecond, usage{rss: 100 << 20, anon: 40 << 20}, usage{rss: 130 << 20, anon: 60 << 20}, 4*time.Second),
			run(Reference, 370*time.Millisecond, usage{rss: 40 << 20, anon: 20 << 20}, usage{rss: 50 << 20, anon: 25 << 20}, 2*time.Second),
		},
	}
}

// rowOf returns the cells of the row titled title.
func rowOf(t *testing.T, tb *table, title string) []string {
	t.Helper()
	for _, row := range tb.rows {
		if row[0] == title {
			return row
		}
	}
	require.Failf(t, "no row", "%q", title)
	return nil
}

func TestSummaryNewRows(t *testing.T) {
	sum := reportFixture().summary()
	assert.Equal(t, []string{"metric", "engine", "reference", "raw limit", "engine/ref", "per round (engine/ref)", "target (engine/ref)"}, sum.header)
	tests := []struct {
		title string
		want  []string
	}{
		{"start until first child s (process start -> warm-up Deployment)", []string{"1.24s", "0.37s", "", "3.35x", "3.35x", ""}},
		{"peak RSS growth per parent KiB, (end of (d) - after warm-up) / N", []string{"30.7", "10.2", "", "3.00x", "3.00x", ""}},
		{"peak anonymous RSS growth per parent KiB, (end of (d) - after warm-up) / N", []string{"20.5", "5.1", "", "4.00x", "4.00x", ""}},
		{"control plane CPU s, (a)-(d)", []string{"8.0", "4.0", "", "2.00x", "2.00x", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.title, func(t *testing.T) {
			assert.Equal(t, tt.want, rowOf(t, sum, tt.title)[1:])
		})
	}
}

func TestPerPhaseControlPlaneColumn(t *testing.T) {
	pp := reportFixture().perPhase()
	assert.Equal(t, "control plane CPU s, engine / reference", pp.header[4])
	want := map[string]string{
		phaseTitles[phaseCreate]: "4.00 / 2.00", phaseTitles[phaseStatus]: "2.00 / 1.00",
		phaseTitles[phaseRecreate]: "1.00 / 0.50", phaseTitles[phaseScale]: "1.00 / 0.50",
		phaseTitles[phaseReload]: "- / -",
	}
	for title, cell := range want {
		assert.Equal(t, cell, rowOf(t, pp, title)[4], title)
	}
}

func TestMemoryProfiles(t *testing.T) {
	r := reportFixture()
	r.cfg.Controllers = append(r.cfg.Controllers, Kro)
	r.Runs[0].heap = &heapSummary{path: "/logs/r1-engine-heap.pprof", inuse: 50 << 20, heapAlloc: 40 << 20, top: []heapSite{
		{"cache.(*threadSafeMap).Add", 25 << 20}, {"render.newMemo[...]", 5 << 20},
	}}
	r.Runs = append(r.Runs, &runResult{controller: Kro, round: 1})
	var b strings.Builder
	r.memoryProfiles(&b)
	assert.Equal(t, `### Memory profile

Heap of round 1 after a garbage collection at the end of the run (after the last phase's usage was read), from the
controller's /debug/pprof/heap: the live heap is the runtime's exact HeapAlloc, per parent all of it over N; the sites
are the profile's in-use bytes by the function that allocated them (flat), an estimate: the runtime samples about
one allocation per 512 KiB allocated, so a small heap's sites are coarse.

engine (r1-engine-heap.pprof): live heap 40.0 MiB (HeapAlloc), 41.0 KiB per parent; the profile's sites sum to 50.0 MiB.

| in-use MiB | share | allocated in               |
| ---------- | ----- | -------------------------- |
| 25.00      | 50.0% | cache.(*threadSafeMap).Add |
| 5.00       | 10.0% | render.newMemo[...]        |

- reference: no profile (no free port for its profiler).
- kro: no profile: kro serves /debug/pprof only when built with the pprof build tag, and bin/kro is built without it.

`, b.String())
}
