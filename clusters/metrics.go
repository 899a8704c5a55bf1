package clusters

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	metricUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "engine_cluster_up",
		Help: "1 when the registered cluster's last probe answered and took the credentials, else 0.",
	}, []string{"cluster"})
	metricLastSeen = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "engine_cluster_last_seen_timestamp_seconds",
		Help: "When the registered cluster last answered a probe (Unix seconds); 0 when it never did.",
	}, []string{"cluster"})
)

func init() {
	metrics.Registry.MustRegister(metricUp, metricLastSeen)
}

func setMetrics(name string, up bool, seen time.Time) {
	v := 0.0
	if up {
		v = 1
	}
	metricUp.WithLabelValues(name).Set(v)
	if seen.IsZero() {
		metricLastSeen.WithLabelValues(name).Set(0)
	} else {
		metricLastSeen.WithLabelValues(name).Set(float64(seen.Unix()))
	}
}

// forget drops a removed cluster's series.
func forget(name string) {
	metricUp.DeleteLabelValues(name)
	metricLastSeen.DeleteLabelValues(name)
}
