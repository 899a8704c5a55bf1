package analysis

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cuengine/engine/internal/promserver"
	"github.com/cuengine/engine/templates/policy"
)

func TestExpandEscapes(t *testing.T) {
	got := Expand(`rate(x{kind="{{kind}}",revision="{{revision}}",wave="{{wave}}"}[1m])`, Vars{Kind: `My"Kind\`, Revision: "3", Wave: 2})
	assert.Equal(t, `rate(x{kind="My\"Kind\\",revision="3",wave="2"}[1m])`, got)
}

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

// TestEvaluateAgainstPrometheus: a real Prometheus scrapes a page the test
// controls; a check passes while the value meets its condition, fails
// naming the value, series and condition once it does not, and is held
// (never passed) when there is no data, when the credentials are wrong
// and when the server is gone. The password appears in no message.
func TestEvaluateAgainstPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a Prometheus server (run without -short)")
	}
	page := &metricsPage{text: "app_error_ratio{revision=\"3\",pod=\"a\"} 0.01\napp_error_ratio{revision=\"3\",pod=\"b\"} 0.02\n"}
	target := httptest.NewServer(page)
	defer target.Close()
	const user, password = "engine", "s3cr3t-pr0m-pass"
	ctx := context.Background()
	prom, err := promserver.Start(ctx, promserver.Options{Targets: []string{strings.TrimPrefix(target.URL, "http://")}, Username: user, Password: password,
		Log: func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }})
	require.NoError(t, err)
	stopped := false
	defer func() {
		if !stopped {
			prom.Stop()
		}
	}()
	server, err := NewServer(prom.URL, Credentials{Username: user, Password: password}, 5*time.Second)
	require.NoError(t, err)
	below := policy.Condition{Op: "<", Bound: 0.05}
	check := policy.AnalysisCheck{Name: "errors", Query: `max(app_error_ratio{revision="{{revision}}"})`, Condition: below}
	perPod := policy.AnalysisCheck{Name: "per-pod", Query: `app_error_ratio{revision="{{revision}}"}`, Condition: below}
	vars := Vars{Kind: "MyKind.webapp.my.domain", Revision: "3", Wave: 1}

	var res Result
	require.Eventually(t, func() bool {
		res = server.Evaluate(ctx, check, vars)
		return res.Verdict == Passed
	}, time.Minute, 200*time.Millisecond, "the first scrape arrives: %+v", res)
	assert.Equal(t, `analysis errors passed: max(app_error_ratio{revision="3"}) is 0.02, the condition is < 0.05`, res.Message)
	assert.Equal(t, 0.02, res.Value)

	page.set("app_error_ratio{revision=\"3\",pod=\"a\"} 0.01\napp_error_ratio{revision=\"3\",pod=\"b\"} 0.3\n")
	require.Eventually(t, func() bool {
		res = server.Evaluate(ctx, perPod, vars)
		return res.Verdict == Failed
	}, time.Minute, 200*time.Millisecond, "%+v", res)
	assert.Equal(t, `analysis per-pod failed: app_error_ratio{revision="3"} is 0.3 for app_error_ratio{instance="`+strings.TrimPrefix(target.URL, "http://")+`", job="test", pod="b", revision="3"}, the condition is < 0.05`, res.Message)
	assert.Equal(t, 0.3, res.Value)

	res = server.Evaluate(ctx, check, Vars{Revision: "9"})
	assert.Equal(t, Held, res.Verdict)
	assert.Equal(t, `analysis errors held: the query max(app_error_ratio{revision="9"}) returned no data (no data is not success)`, res.Message)
	assert.True(t, math.IsNaN(res.Value))

	wrong, err := NewServer(prom.URL, Credentials{Username: user, Password: "guess"}, 5*time.Second)
	require.NoError(t, err)
	res = wrong.Evaluate(ctx, check, vars)
	assert.Equal(t, Held, res.Verdict, res.Message)
	assert.Contains(t, res.Message, "analysis errors held: Prometheus at "+prom.URL+" did not answer the query")
	assert.NotContains(t, res.Message, password)
	assert.NotContains(t, res.Message, "guess")

	require.NoError(t, prom.Stop())
	stopped = true
	res = server.Evaluate(ctx, check, vars)
	assert.Equal(t, Held, res.Verdict)
	assert.Contains(t, res.Message, "connection refused")
	assert.NotContains(t, res.Message, password)
}
