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

// metricEvaluationsRefused counts the renderings refused without
// evaluating (budget.go): "remembered", the same inputs went over a limit
// before; "budget", an object whose evaluation overran before, over the
// budget; "busy", no evaluator process free for it in time (isolated.go).
var metricEvaluationsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "engine_evaluations_refused_total",
	Help: "Renderings refused without evaluating: remembered (the same inputs went over a limit before) budget (an object whose evaluation overran, past --max-overrunning-evaluations or --max-evaluation-heap), or busy (no evaluator process free in time: --evaluator-processes).",
}, []string{"why"})

// metricHeapExceeded counts the times the live heap was found past the
// hard bar (--max-evaluation-heap-hard) while evaluations past the timeout
// ran (heapbar.go): the engine then exits, so it is at most one per
// process; the restarts are the pod's.
var metricHeapExceeded = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "engine_evaluation_heap_exceeded_total",
	Help: "Times the live heap was past --max-evaluation-heap-hard while evaluations past --evaluation-timeout ran: the engine then exits, to be restarted, and the restarted engine does not evaluate those objects again.",
})

func init() {
	metrics.Registry.MustRegister(metricEvaluationsOverrunning, metricEvaluationsRefused, metricHeapExceeded)
}
