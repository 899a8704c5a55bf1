package plugin

import "github.com/prometheus/client_golang/prometheus"

var (
	metricUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "engine_provider_up",
		Help: "Whether a provider plugin is running and answers (its handshake, then its pings) (1) or not (0), by provider.",
	}, []string{"provider"})
	metricStarted = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "engine_provider_started",
		Help: "Whether a provider plugin has been started (1) or is idle because nothing has needed it yet (0), by provider.",
	}, []string{"provider"})
	metricRestarts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "engine_provider_restarts_total",
		Help: "Restarts of a provider plugin after it exited or failed to start, by provider.",
	}, []string{"provider"})
)

// Collectors are the host's metrics, for the engine to register (the
// package does not, so that a plugin's own binary needs no registry).
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{metricUp, metricStarted, metricRestarts}
}
