package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/cuengine/engine/providers"
)

const waitFor = 20 * time.Second

// TestNewProviders: every engine-provider-<name> in the directory is a
// provider, its health series served from the start; each is idle, and
// healthy, until a call needs it, and /readyz?verbose says so.
func TestNewProviders(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"engine-provider-gcs", "engine-provider-sql", "engine"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755))
	}
	reg, plugins, err := newProviders(logr.Discard(), dir, pluginPing{})
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
	for _, want := range []string{
		"engine_provider_up/gcs", "engine_provider_up/sql",
		"engine_provider_started/gcs", "engine_provider_started/sql",
		"engine_provider_restarts_total/gcs", "engine_provider_restarts_total/sql",
	} {
		assert.True(t, series[want], want)
	}

	probe := &probeServer{eng: fakeEngineState{}, apiserver: func(context.Context) error { return nil }, plugins: pluginsHealth(plugins), pluginLines: pluginsStatus(plugins)}
	readyz := func(query string) (int, string) {
		rec := httptest.NewRecorder()
		probe.readyz(rec, httptest.NewRequest(http.MethodGet, "/readyz"+query, nil))
		return rec.Code, rec.Body.String()
	}
	require.NoError(t, pluginsHealth(plugins)(), "idle is not down")
	code, body := readyz("")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok\n", body)
	code, body = readyz("?verbose")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok\nprovider gcs: idle (not needed yet)\nprovider sql: idle (not needed yet)\n", body)

	// The engine runs them all; a call to gcs starts it (a script that
	// exits at once: down), sql stays idle.
	ctx, cancel := context.WithCancel(context.Background())
	var running sync.WaitGroup
	for _, p := range plugins {
		running.Add(1)
		go func() { defer running.Done(); _ = p.Run(ctx) }()
	}
	defer func() { cancel(); running.Wait() }()
	call, stop := context.WithTimeout(context.Background(), waitFor)
	defer stop()
	_, err = plugins[0].Apply(call, providers.Request{Name: "data", ExternalName: "x"})
	reason, _ := providers.Classify(err)
	assert.Equal(t, providers.ReasonProviderUnavailable, reason, "%v", err)
	gcs := "provider gcs: plugin " + filepath.Join(dir, "engine-provider-gcs") + " down (restarts: "
	require.Eventually(t, func() bool {
		err := pluginsHealth(plugins)()
		return err != nil && strings.HasPrefix(err.Error(), gcs) && strings.HasSuffix(err.Error(), "): exited with status 0 before the handshake")
	}, waitFor, 10*time.Millisecond)
	code, body = readyz("?verbose")
	assert.Equal(t, http.StatusInternalServerError, code)
	assert.True(t, strings.HasPrefix(body, "not ready: "+gcs), body)
	assert.Contains(t, body, "\nprovider gcs: down (restarts: ")
	assert.True(t, strings.HasSuffix(body, "\nprovider sql: idle (not needed yet)\n"), body)
	assert.True(t, plugins[1].Status().Idle)

	_, _, err = newProviders(logr.Discard(), filepath.Join(dir, "missing"), pluginPing{})
	assert.EqualError(t, err, "--provider-dir: provider directory: open "+filepath.Join(dir, "missing")+": no such file or directory")
}
