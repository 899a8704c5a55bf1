package harness

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseRequestTotals(t *testing.T) {
	raw := []byte(`# HELP apiserver_request_total Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="apps",resource="deployments",scope="resource",subresource="",verb="APPLY",version="v1"} 7
apiserver_request_total{code="409",component="apiserver",dry_run="",group="apps",resource="deployments",scope="resource",subresource="",verb="APPLY",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="webapp.my.domain",resource="mykinds",scope="resource",subresource="status",verb="PUT",version="v1"} 3
apiserver_request_duration_seconds_count{verb="PUT"} 99
`)
	got, err := parseRequestTotals(raw)
	require.NoError(t, err)
	assert.Equal(t, counts{"APPLY deployments": 9, "PUT mykinds/status": 3}, got)
}

func TestParseEvaluations(t *testing.T) {
	raw := []byte(`# HELP engine_template_evaluation_duration_seconds Time to evaluate a template for one parent, by kind.
# TYPE engine_template_evaluation_duration_seconds histogram
engine_template_evaluation_duration_seconds_bucket{kind="MyKind.webapp.my.domain",le="5e-05"} 235
engine_template_evaluation_duration_seconds_sum{kind="MyKind.webapp.my.domain"} 0.5
engine_template_evaluation_duration_seconds_count{kind="MyKind.webapp.my.domain"} 3402
engine_template_evaluation_duration_seconds_count{kind="Gcs.storage.cuengine.dev"} 4
# HELP engine_template_evaluations_remembered_total Evaluations the template's memory answered.
# TYPE engine_template_evaluations_remembered_total counter
engine_template_evaluations_remembered_total{kind="MyKind.webapp.my.domain"} 965
engine_template_evaluations_remembered_total{kind="Gcs.storage.cuengine.dev"} 1
engine_rollouts_total{kind="MyKind.webapp.my.domain",phase="Complete"} 1
`)
	got, err := parseEvaluations(raw)
	require.NoError(t, err)
	assert.Equal(t, evaluationCounts{total: 3406, remembered: 966}, got)

	_, err = parseEvaluations([]byte("engine_rollouts_total{kind=\"x\"} 1\n"))
	assert.ErrorContains(t, err, "no engine_template_evaluation_duration_seconds")
	_, err = parseEvaluations([]byte("engine_template_evaluation_duration_seconds_count{kind=\"x\"} many\n"))
	assert.ErrorContains(t, err, "malformed metric line")
}

func TestParseLabels(t *testing.T) {
	assert.Equal(t, map[string]string{"a": `x,"y`, "b": ""}, parseLabels(`a="x,\"y",b=""`))
}

func TestClassify(t *testing.T) {
	tests := []struct {
		method, path, contentType, want string
	}{
		{"GET", "/apis/apps/v1/deployments?watch=true", "", "WATCH deployments"},
		{"GET", "/apis/apps/v1/namespaces/bench/deployments", "", "LIST deployments"},
		{"GET", "/apis/apps/v1/namespaces/bench/deployments/web", "", "GET deployments"},
		{"PUT", "/apis/apps/v1/namespaces/bench/deployments/web/status", "", "PUT deployments/status"},
		{"PATCH", "/apis/apps/v1/namespaces/bench/deployments/web", "application/apply-patch+yaml", "APPLY deployments"},
		{"POST", "/apis/webapp.my.domain/v1/namespaces/bench/mykinds", "", "POST mykinds"},
		{"POST", "/api/v1/namespaces", "", "POST namespaces"},
		{"DELETE", "/api/v1/namespaces/bench/events", "", "DELETECOLLECTION events"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			u, err := url.Parse(tt.path)
			require.NoError(t, err)
			req := &http.Request{Method: tt.method, URL: u, Header: http.Header{}}
			req.Header.Set("Content-Type", tt.contentType)
			assert.Equal(t, tt.want, classify(req))
		})
	}
}

func TestControllerRequests(t *testing.T) {
	before := snapshot{api: counts{"POST mykinds": 1}, own: counts{"POST mykinds": 1}}
	after := snapshot{
		api: counts{"POST mykinds": 11, "APPLY deployments": 10, "PUT leases": 3, "WATCH deployments": 2},
		own: counts{"POST mykinds": 11},
	}
	assert.Equal(t, counts{"APPLY deployments": 10}, after.controllerRequests(before))
}

func TestParseProc(t *testing.T) {
	cpu, err := parseCPU("4242 (my engine) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0")
	require.NoError(t, err)
	assert.Equal(t, 3*time.Second, cpu)
	status := "Name:\tengine\nVmPeak:\t 9 kB\nVmHWM:\t  2048 kB\nVmRSS:\t 1 kB\nRssAnon:\t   512 kB\n"
	hwm, err := parseStatusKiB(status, "VmHWM:")
	require.NoError(t, err)
	assert.Equal(t, int64(2<<20), hwm)
	anon, err := parseStatusKiB(status, "RssAnon:")
	require.NoError(t, err)
	assert.Equal(t, int64(512<<10), anon)
	_, err = parseStatusKiB(status, "RssFile:")
	assert.ErrorContains(t, err, "no RssFile:")
}

func TestAnonPeakKeepsTheHighestSample(t *testing.T) {
	var a anonPeak
	for _, n := range []int64{5, 9, 3} {
		a.observe(n)
	}
	assert.Equal(t, int64(9), a.get())
}

func TestMedian(t *testing.T) {
	assert.Equal(t, 2.0, median([]float64{3, 1, 2}))
	assert.Equal(t, 2.5, median([]float64{4, 1, 2, 3}))
	assert.Equal(t, 0.0, median(nil))
}

func TestParseChildren(t *testing.T) {
	tests := []struct {
		in   string
		want []int
	}{
		{"31793 31801 \n", []int{31793, 31801}},
		{"", nil},
		{"12 x 13", []int{12, 13}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			assert.Equal(t, tt.want, parseChildren(tt.in))
		})
	}
}

func TestStatFields(t *testing.T) {
	tests := []struct {
		stat, wantErr, want string
	}{
		{"99 (a (b) c) R 1 99 99 0 -1 0 0 0 0 0 1 2 0", "", "R 1 99 99 0 -1 0 0 0 0 0 1 2 0"},
		{"4242 etcd S 17", `malformed /proc stat "4242 etcd S 17"`, ""},
		{"4242 (etcd) S 17 1", `malformed /proc stat "4242 (etcd) S 17 1"`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.stat, func(t *testing.T) {
			got, err := statFields(tt.stat)
			if tt.wantErr != "" {
				assert.EqualError(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, strings.Join(got, " "))
		})
	}
}

func TestPerParentKiB(t *testing.T) {
	tests := []struct {
		bytes int64
		n     int
		want  float64
	}{
		{10 << 20, 1000, 10.24},
		{35 << 10 * 10000, 10000, 35},
		{-512 << 10, 100, -5.12},
	}
	for _, tt := range tests {
		assert.InDelta(t, tt.want, perParentKiB(tt.bytes, tt.n), 1e-9)
	}
}

func TestControlPlaneAD(t *testing.T) {
	full := &runResult{controlPlaneCPU: map[string]time.Duration{
		phaseCreate: 1500 * time.Millisecond, phaseStatus: time.Second, phaseRecreate: 200 * time.Millisecond,
		phaseScale: 300 * time.Millisecond, phaseReload: time.Hour,
	}}
	got, ok := full.controlPlaneAD()
	assert.True(t, ok)
	assert.Equal(t, 3*time.Second, got)

	partial := &runResult{controlPlaneCPU: map[string]time.Duration{phaseCreate: time.Second}}
	_, ok = partial.controlPlaneAD()
	assert.False(t, ok)
}

func TestParseReconciles(t *testing.T) {
	raw := []byte(`# HELP controller_runtime_reconcile_total Total number of reconciliations per controller
controller_runtime_reconcile_total{controller="engine-MyKind.webapp.my.domain/v1",result="success"} 4999
controller_runtime_reconcile_total{controller="engine-MyKind.webapp.my.domain/v1",result="error"} 2
controller_runtime_reconcile_total{controller="engine-Gcs.storage.cuengine.dev/v1",result="success"} 0
workqueue_depth{controller="engine-MyKind.webapp.my.domain/v1",name="engine-MyKind.webapp.my.domain/v1"} 3
workqueue_depth_other 7
`)
	got, err := parseReconciles(raw)
	require.NoError(t, err)
	assert.Equal(t, reconcileMetrics{reconciles: 5001, depth: 3}, got)

	_, err = parseReconciles([]byte("workqueue_depth{name=\"x\"} many\n"))
	require.EqualError(t, err, `malformed metric line "workqueue_depth{name=\"x\"} many": strconv.ParseFloat: parsing "many": invalid syntax`)
}

func TestParseWatchLists(t *testing.T) {
	raw := []byte(`apiserver_watch_list_duration_seconds_bucket{component="apiserver",group="apps",resource="deployments",scope="namespace",version="v1",le="0.05"} 1
apiserver_watch_list_duration_seconds_count{component="apiserver",group="apps",resource="deployments",scope="cluster",version="v1"} 2
apiserver_watch_list_duration_seconds_count{component="apiserver",group="webapp.my.domain",resource="mykinds",scope="cluster",version="v1"} 1
`)
	got, err := parseWatchLists(raw)
	require.NoError(t, err)
	assert.Equal(t, counts{"deployments": 2, "mykinds": 1}, got)
}
