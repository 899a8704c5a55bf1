package render

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// metricEvaluationsOverrunning counts the evaluations past the timeout
// still running (evaluateWithin). It is served on the manager's metrics
// endpoint with the engine's other metrics (engine/metrics.go,
// reconciler/metrics.go).
var metricEvaluationsOverrunning = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "engine_evaluations_overrunning",
	Help: "Evaluations past --evaluation-timeout still running in the background (CUE cannot be interrupted); each holds a CPU while it runs.",
})

func init() {
	metrics.Registry.MustRegister(metricEvaluationsOverrunning)
}
