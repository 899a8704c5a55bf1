package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cuengine/engine/templates"
)

// TestDevChecksTheWorkloadClusters: engine dev refuses, before starting
// anything, a workload cluster name the registry would refuse, a name
// given twice and workload clusters turned off; a cluster no template may
// target is started but warned about.
func TestDevChecksTheWorkloadClusters(t *testing.T) {
	set, err := templates.Load(placementDir(t, "west"))
	require.NoError(t, err)
	check := func(o *devOptions) (string, error) {
		var stderr bytes.Buffer
		err := o.checkWorkloadClusters(set, &stderr)
		return stderr.String(), err
	}
	out, err := check(&devOptions{workloadClusters: []string{"west", "east"}})
	require.NoError(t, err)
	assert.Empty(t, out, "both listed in policy.clusters")

	_, err = check(&devOptions{workloadClusters: []string{"West_1"}})
	assert.ErrorContains(t, err, `--workload-cluster "West_1"`)
	_, err = check(&devOptions{workloadClusters: []string{"west", "west"}})
	assert.ErrorContains(t, err, "given twice")
	off := &devOptions{workloadClusters: []string{"west"}}
	off.clustersNamespace = "-"
	_, err = check(off)
	assert.ErrorContains(t, err, "workload clusters off")

	out, err = check(&devOptions{workloadClusters: []string{"north"}})
	require.NoError(t, err)
	assert.Contains(t, out, `dev: warning: no template in`)
	assert.Contains(t, out, `lists cluster "north" in policy.clusters`)
}
