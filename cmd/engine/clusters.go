package main

import (
	"cmp"
	"fmt"
	"time"

	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/cuengine/engine/clusters"
	"github.com/cuengine/engine/engine"
)

// clusterSource is where the engine reads the workload clusters'
// registrations: the cluster Secrets of --clusters-namespace; nil when
// turned off ("-").
func (o *runOptions) clusterSource(cfg *rest.Config) (clusters.Source, error) {
	ns := o.clustersNamespaceName()
	if ns == "-" {
		return nil, nil
	}
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the client of the cluster Secrets: %w", err)
	}
	return clusters.Secrets{Client: core, Namespace: ns}, nil
}

// clustersNamespaceName is the namespace of the cluster Secrets, "-"
// when workload clusters are off.
func (o *runOptions) clustersNamespaceName() string {
	return cmp.Or(o.clustersNamespace, o.leaderElectionNamespace, podNamespace(), "default")
}

// clusterStatuses is what /readyz reads of the engine's workload clusters.
type clusterStatuses interface {
	ClusterStatus() []clusters.Status
	ClusterRegistrationsUnreadable() string
}

var _ clusterStatuses = (*engine.Engine)(nil)

// clusterLines says, for /readyz?verbose, how each workload cluster is:
// a cluster down never makes the engine unready (its parents say so).
func clusterLines(eng clusterStatuses) func() []string {
	return func() []string {
		var lines []string
		if why := eng.ClusterRegistrationsUnreadable(); why != "" {
			lines = append(lines, "cluster registrations: unreadable (the clusters they register are unknown): "+why)
		}
		for _, st := range eng.ClusterStatus() {
			line := "cluster " + st.Name + " (" + st.Origin + "): "
			switch {
			case st.Removed:
				line += "removed: " + st.Error
			case st.Up:
				line += "up, last seen " + st.LastSeen.UTC().Format(time.RFC3339)
			default:
				line += "down: " + st.Error
			}
			lines = append(lines, line)
		}
		return lines
	}
}

// linesOf joins the lines of several sources.
func linesOf(sources ...func() []string) func() []string {
	return func() []string {
		var out []string
		for _, s := range sources {
			out = append(out, s()...)
		}
		return out
	}
}
