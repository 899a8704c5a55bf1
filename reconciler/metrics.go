package reconciler

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/cuengine/engine/contract"
)

// Prometheus metrics of the reconciles, served on the manager's metrics
// endpoint next to the engine's and controller-runtime's own.
var (
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
	metrics.Registry.MustRegister(metricEvaluateSeconds, metricEvaluationsRemembered, metricLimitExceeded,
		metricProviderCalls, metricProviderSeconds)
}

// The functions below create the series of a kind or a provider at zero
// before anything happens to it: a series that appears only with its first
// event is missing from rate() and from alerts until then, and dashboards
// show "no data" instead of 0.

// InitKindMetrics creates the reconciles' per-kind series of a served
// template.
func InitKindMetrics(kind string) {
	metricEvaluateSeconds.WithLabelValues(kind)
	metricEvaluationsRemembered.WithLabelValues(kind)
	for _, limit := range []string{contract.ReasonEvaluationTimeout, contract.ReasonTooManyChildren, contract.ReasonRenderTooLarge} {
		metricLimitExceeded.WithLabelValues(kind, limit)
	}
}

// InitProviderMetrics creates the series of a registered provider.
func InitProviderMetrics(provider string) {
	for _, op := range []string{"apply", "delete"} {
		metricProviderSeconds.WithLabelValues(provider, op)
		metricProviderCalls.WithLabelValues(provider, op, "success")
	}
}
