package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// TestNewProviders: every engine-provider-<name> in the directory is a
// provider, its health series served from the start.
func TestNewProviders(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"engine-provider-gcs", "engine-provider-sql", "engine"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755))
	}
	reg, plugins, err := newProviders(logr.Discard(), dir)
	require.NoError(t, err)
	assert.Equal(t, []string{"gcs", "sql"}, reg.Names())
	require.Len(t, plugins, 2)
	assert.Equal(t, "gcs", plugins[0].Name())

	families, err := metrics.Registry.Gather()
	require.NoError(t, err)
	series := map[string]bool{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "provider" {
					series[f.GetName()+"/"+l.GetValue()] = true
				}
			}
		}
	}
	for _, want := range []string{"engine_provider_up/gcs", "engine_provider_up/sql", "engine_provider_restarts_total/gcs", "engine_provider_restarts_total/sql"} {
		assert.True(t, series[want], want)
	}
	assert.EqualError(t, pluginsHealth(plugins)(), "provider gcs: plugin "+filepath.Join(dir, "engine-provider-gcs")+" down (restarts: 0): not started yet")

	_, _, err = newProviders(logr.Discard(), filepath.Join(dir, "missing"))
	assert.EqualError(t, err, "--provider-dir: provider directory: open "+filepath.Join(dir, "missing")+": no such file or directory")
}
