package engine

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/rollout"
)

// Prometheus metrics of the engine, served on the manager's metrics endpoint
// next to controller-runtime's own (reconcile counts, queue depth...).
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
	metricEvaluateSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "engine_template_evaluation_duration_seconds",
		Help:    "Time to evaluate a template for one parent, by kind.",
		Buckets: []float64{50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 10e-3, 50e-3},
	}, []string{"kind"})
	metricEvaluationsRemembered = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "engine_template_evaluations_remembered_total",
		Help: "Evaluations the template's memory answered (the inputs of a recent one), by kind; they are counted in engine_template_evaluation_duration_seconds too.",
	}, []string{"kind"})
	metricLimitExceeded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "engine_limit_exceeded_total",
		Help: "Evaluations refused for going over a limit, by kind and limit (EvaluationTimeout, TooManyChildren, RenderTooLarge).",
	}, []string{"kind", "limit"})
	metricProviderCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "engine_provider_calls_total",
		Help: "Calls to external-resource providers, by provider, operation (apply, delete) and result (success, or the error's reason: Unavailable, CredentialsError, ...).",
	}, []string{"provider", "operation", "result"})
	metricProviderSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "engine_provider_call_duration_seconds",
		Help:    "Time of one call to an external-resource provider, by provider and operation.",
		Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
	}, []string{"provider", "operation"})
)

func init() {
	metrics.Registry.MustRegister(metricReloads, metricReloadHealthy, metricReloadSeconds, metricRevision, metricEvaluateSeconds, metricEvaluationsRemembered, metricLimitExceeded,
		metricProviderCalls, metricProviderSeconds)
	metricReloadHealthy.Set(1)
	for _, result := range []string{"success", "failure"} {
		metricReloads.WithLabelValues(result)
	}
}

// The functions below create the series of a kind or a provider at zero
// before anything happens to it: a series that appears only with its first
// event is missing from rate() and from alerts until then, and dashboards
// show "no data" instead of 0.

// initKindMetrics creates the per-kind series of a served template.
func initKindMetrics(kind string) {
	metricEvaluateSeconds.WithLabelValues(kind)
	metricEvaluationsRemembered.WithLabelValues(kind)
	for _, limit := range []string{contract.ReasonEvaluationTimeout, contract.ReasonTooManyChildren, contract.ReasonRenderTooLarge} {
		metricLimitExceeded.WithLabelValues(kind, limit)
	}
	rollout.InitMetrics(kind)
}

// initProviderMetrics creates the series of a registered provider.
func initProviderMetrics(provider string) {
	for _, op := range []string{"apply", "delete"} {
		metricProviderSeconds.WithLabelValues(provider, op)
		metricProviderCalls.WithLabelValues(provider, op, "success")
	}
}
