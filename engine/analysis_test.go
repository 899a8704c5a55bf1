package engine_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/internal/promserver"
	"github.com/cuengine/engine/revisions"
	"github.com/cuengine/engine/rollout/analysis"
	"github.com/cuengine/engine/templates/policy"
)

// metricsPage serves a Prometheus text page the test rewrites.
type metricsPage struct {
	mu   sync.Mutex
	text string
}

func (p *metricsPage) set(text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.text = text
}

func (p *metricsPage) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprint(w, p.text)
}

// TestAnalysisOnPrometheus: a rollout whose waves soak 3 s under the
// check max(app_error_ratio{kind="{{kind}}"}) < 0.05, against a real
// Prometheus that scrapes a page the test writes. With Prometheus
// stopped, the first wave holds past its soak and says why; once it is
// back (same address) the revision rolls out. Then the ratio crosses the
// threshold: the next revision is rolled back, naming the query and the
// value.
func TestAnalysisOnPrometheus(t *testing.T) {
	controlPlane(t)
	t.Parallel()
	page := &metricsPage{text: "app_error_ratio{kind=\"Probed.probed.cuengine.dev\"} 0.01\n"}
	target := httptest.NewServer(page)
	defer target.Close()
	logf := func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }
	promOpts := promserver.Options{Targets: []string{strings.TrimPrefix(target.URL, "http://")}, Log: logf}
	ctx := context.Background()
	prom, err := promserver.Start(ctx, promOpts)
	require.NoError(t, err)
	defer func() { require.NoError(t, prom.Stop()) }()
	server, err := analysis.NewServer(prom.URL, analysis.Credentials{}, 2*time.Second)
	require.NoError(t, err)

	const kind = "Probed"
	const rollout = `waves: [1, "100%"], soak: "3s", analysis: [{name: "errors", query: "max(app_error_ratio{kind=\"{{kind}}\"})", condition: "< 0.05"}]`
	eng, ctx, ns, dir := soakFleet(t, kind, soakTemplate(kind, "v1", rollout), engine.Options{Analyzer: server})
	gvk := soakGVK(kind)

	// Prometheus down: the first wave soaks, and holds past its soak.
	require.NoError(t, prom.Stop())
	eng.Reload(ctx, templateFile(t, dir, "t.cue", soakTemplate(kind, "v2", rollout)))
	require.NoError(t, eng.ReloadError())
	rev := soakStarted(t, ns, gvk, 2)
	soakEnd := rev.SoakSince.Add(3 * time.Second)
	eventually(t, "revision 2 held past its soak", func(ctx context.Context) (bool, error) {
		var err error
		rev, err = revision(ctx, ns, gvk, 2)
		return err == nil && strings.Contains(rev.Message, "soaked 3s") && strings.Contains(rev.Message, "held: analysis errors held: Prometheus at "+prom.URL+" did not answer the query"), err
	})
	assert.Contains(t, rev.Message, "(the wave waits: no data is not success)")
	assert.Contains(t, rev.Message, `max(app_error_ratio{kind="Probed.probed.cuengine.dev"})`)
	require.Len(t, rev.Analysis, 1)
	assert.Contains(t, rev.Analysis[0], "analysis errors held: ")
	holdsUntil(t, ns, gvk, 2, soakEnd.Add(3*time.Second))

	// Back at the same address: the wave passes, then the next.
	promOpts.Listen = strings.TrimPrefix(prom.URL, "http://")
	prom, err = promserver.Start(ctx, promOpts)
	require.NoError(t, err)
	rev = newestRevision(t, ns, gvk, 2, revisions.PhaseComplete)
	assert.Equal(t, "rolled out in 2 waves", rev.Message)
	eventually(t, "both objects on revision 2", func(ctx context.Context) (bool, error) { return readyOn(ctx, gvk, ns, 2, "s-0", "s-1") })

	// The error ratio crosses the threshold: revision 3 is rolled back.
	page.set("app_error_ratio{kind=\"Probed.probed.cuengine.dev\"} 0.3\n")
	eventually(t, "Prometheus has scraped the new ratio", func(ctx context.Context) (bool, error) {
		check := policy.AnalysisCheck{Name: "errors", Query: `max(app_error_ratio{kind="{{kind}}"})`, Condition: policy.Condition{Op: "<", Bound: 0.05}}
		res := server.Evaluate(ctx, check, analysis.Vars{Kind: "Probed.probed.cuengine.dev"})
		return res.Verdict == analysis.Failed, nil
	})
	eng.Reload(ctx, templateFile(t, dir, "t.cue", soakTemplate(kind, "v3", rollout)))
	require.NoError(t, eng.ReloadError())
	rev = newestRevision(t, ns, gvk, 3, revisions.PhaseRolledBack)
	assert.Equal(t, `wave 1 of 2: analysis errors failed: max(app_error_ratio{kind="Probed.probed.cuengine.dev"}) is 0.3, the condition is < 0.05`, rev.Message)
	eventually(t, "both objects back on revision 2", func(ctx context.Context) (bool, error) { return onRevision(ctx, gvk, ns, 2, "s-0", "s-1") })
}
