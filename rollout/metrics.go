package rollout

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/cuengine/engine/revisions"
)

var metricRollouts = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "engine_rollouts_total",
	Help: "Template revision rollouts by kind and by the phase they reached (Progressing, Held, Complete, RolledBack).",
}, []string{"kind", "phase"})

func init() {
	metrics.Registry.MustRegister(metricRollouts)
}

// InitMetrics creates a kind's rollout series at zero, so that a rate over
// them is defined before its first rollout.
func InitMetrics(kind string) {
	for _, phase := range []revisions.Phase{revisions.PhaseProgressing, revisions.PhaseHeld, revisions.PhaseComplete, revisions.PhaseRolledBack} {
		metricRollouts.WithLabelValues(kind, string(phase))
	}
}
