package migration

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var metricObjects = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "engine_storage_migration_objects",
	Help: "Objects of a CRD handled by its current storage-version migration, by state (rewritten, current, failed).",
}, []string{"crd", "state"})

func init() { metrics.Registry.MustRegister(metricObjects) }
