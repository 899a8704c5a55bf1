package engine

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/cuengine/engine/reconciler"
	"github.com/cuengine/engine/rollout"
)

// Prometheus metrics of the engine, served on the manager's metrics endpoint
// next to controller-runtime's own (reconcile counts, queue depth...) and
// those of the reconciles (package reconciler's).
var (
	metricReloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "engine_template_reloads_total",
		Help: "Template directory reloads, by result (success, failure).",
	}, []string{"result"})
	metricReloadHealthy = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "engine_template_reload_healthy",
		Help: "1 when the templates on disk are the ones being served; 0 while a broken edit keeps the last good version serving.",
	})
	metricReloadSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "engine_template_reload_duration_seconds",
		Help:    "Time from the first file change of a burst to the new templates being served.",
		Buckets: []float64{0.1, 0.25, 0.5, 1, 2, 5, 10, 30},
	})
	metricRevision = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "engine_template_revision",
		Help: "1 for the template revision (content hash) each kind is serving.",
	}, []string{"kind", "template", "revision"})
)

func init() {
	metrics.Registry.MustRegister(metricReloads, metricReloadHealthy, metricReloadSeconds, metricRevision)
	metricReloadHealthy.Set(1)
	for _, result := range []string{"success", "failure"} {
		metricReloads.WithLabelValues(result)
	}
}

// initKindMetrics creates the per-kind series of a served template at zero
// before anything happens to it (the reconciles' too): a series that
// appears only with its first event is missing from rate() and from alerts
// until then, and dashboards show "no data" instead of 0.
func initKindMetrics(kind string) {
	reconciler.InitKindMetrics(kind)
	rollout.InitMetrics(kind)
}
