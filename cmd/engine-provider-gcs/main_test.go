package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cuengine/engine/internal/gcsemulator"
	"github.com/cuengine/engine/providers"
	"github.com/cuengine/engine/providers/plugin"
)

const waitFor = time.Minute

// pluginDir holds the engine-provider-gcs built from this package, as the
// engine finds it beside itself.
var pluginDir string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// Building the plugin (the Cloud Storage client and its tree) takes
		// a minute on two cores when it is not cached: the fast lane skips.
		fmt.Println("engine-provider-gcs: skipped: builds the plugin binary (run without -short)")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "engine-provider-gcs-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pluginDir = dir
	build := exec.Command("go", "build", "-o", filepath.Join(dir, plugin.Prefix+"gcs"), ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building engine-provider-gcs:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// logs is what the host logged, the plugin's stderr included.
type logs struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestPluginAgainstTheEmulator runs the real plugin binary against the
// Cloud Storage emulator through the engine's side of the boundary: a
// bucket is created, observed, and deleted, with the plugin killed twice
// on the way; every call in between is retryable ProviderUnavailable or
// succeeds, and there is never more than the one bucket.
func TestPluginAgainstTheEmulator(t *testing.T) {
	emu, err := gcsemulator.Start(gcsemulator.Options{})
	require.NoError(t, err)
	defer emu.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	found, err := plugin.Discover(pluginDir)
	require.NoError(t, err)
	require.Equal(t, []plugin.Found{{Name: "gcs", Path: filepath.Join(pluginDir, "engine-provider-gcs")}}, found)

	log := &logs{}
	p := plugin.New(plugin.Options{
		Name: found[0].Name, Path: found[0].Path,
		Env: []string{"STORAGE_EMULATOR_HOST=" + emu.Host()},
		Logger: funcr.New(func(prefix, args string) {
			log.mu.Lock()
			defer log.mu.Unlock()
			log.b.WriteString(prefix + " " + args + "\n")
		}, funcr.Options{}),
		MinBackoff: 100 * time.Millisecond,
	})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	defer func() {
		stop()
		require.NoError(t, <-done)
	}()
	up := func(restarts int) {
		t.Helper()
		require.Eventually(t, func() bool { st := p.Status(); return st.Up && st.Restarts == restarts }, waitFor, 10*time.Millisecond, "log:\n%s", log)
	}
	kill := func() {
		t.Helper()
		require.NoError(t, syscall.Kill(p.Status().Pid, syscall.SIGKILL))
	}
	buckets := func() []string {
		t.Helper()
		list, err := emu.Buckets(ctx)
		require.NoError(t, err)
		var names []string
		for _, b := range list {
			names = append(names, b.Name)
		}
		return names
	}
	// retried calls fn, as the engine's backoff would, while it fails with
	// ProviderUnavailable; any other error fails the test.
	retried := func(fn func() error) {
		t.Helper()
		require.Eventually(t, func() bool {
			err := fn()
			if err == nil {
				return true
			}
			reason, retryable := providers.Classify(err)
			require.Equal(t, providers.ReasonProviderUnavailable, reason, "%v", err)
			require.True(t, retryable)
			return false
		}, waitFor, 50*time.Millisecond)
	}

	up(0)
	req := providers.Request{
		Name:  "bucket",
		Owner: providers.Owner{UID: "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0", Namespace: "ns", Name: "app", Kind: "Gcs"},
		Spec:  map[string]any{"projectID": "proj-a", "bucketName": "data", "location": "EU", "uniformBucketLevelAccess": true},
	}
	name, settings, err := p.ExternalName(context.Background(), req, 0)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(name, "data-"), name)
	req.ExternalName, req.Settings = name, settings

	// The name is recorded; the plugin dies before the create.
	kill()
	var obs providers.Observation
	retried(func() error { var err error; obs, err = p.Apply(ctx, req); return err })
	up(1)
	assert.True(t, obs.Exists)
	assert.True(t, obs.Ready)
	assert.Equal(t, name, obs.State["name"])
	assert.Equal(t, []string{name}, buckets())

	// Observed again after another crash: the same bucket, not a second.
	kill()
	retried(func() error { var err error; obs, err = p.Apply(ctx, req); return err })
	up(2)
	assert.Equal(t, name, obs.State["name"])
	assert.Equal(t, []string{name}, buckets())

	// Deleted with the name and settings alone, as after a template is gone.
	require.NoError(t, p.Delete(ctx, providers.Request{Name: "bucket", ExternalName: name, Owner: req.Owner, Settings: settings}))
	assert.Empty(t, buckets())
	assert.Contains(t, log.String(), `"msg"="provider plugin output" "provider"="gcs"`)
}
