package plugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cuengine/engine/providers"
)

const waitFor = 20 * time.Second

// startPlugin runs the test binary as plugin name, supervised until the
// test ends, and waits for it to be up.
func startPlugin(t *testing.T, name string, env ...string) (*Plugin, *logBuffer) {
	t.Helper()
	p, logs := newTestPlugin(t, name, env...)
	require.Eventually(t, func() bool { return p.Status().Up }, waitFor, 10*time.Millisecond, "plugin up; log:\n%s", logs)
	return p, logs
}

func newTestPlugin(t *testing.T, name string, env ...string) (*Plugin, *logBuffer) {
	t.Helper()
	return runTestPlugin(t, Options{Name: name, Env: pluginEnv(name, env...)})
}

// runTestPlugin runs the test binary as the plugin opts names, with the
// tests' short backoff, supervised until the test ends.
func runTestPlugin(t *testing.T, opts Options) (*Plugin, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	opts.Path, opts.Logger = self(t), logs.logger()
	opts.MinBackoff, opts.MaxBackoff, opts.StopTimeout = 50*time.Millisecond, 200*time.Millisecond, 5*time.Second
	p := New(opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(waitFor):
			t.Error("Run did not return after its context ended")
		}
	})
	return p, logs
}

func self(t *testing.T) string {
	t.Helper()
	path, err := os.Executable()
	require.NoError(t, err)
	return path
}

// pluginEnv makes the test binary serve name. The race detector's pause
// at exit (a second by default) is turned off: the tests stop and crash
// plugins often.
func pluginEnv(name string, env ...string) []string {
	return append([]string{envTestPlugin + "=" + name, "GORACE=atexit_sleep_ms=0"}, env...)
}

var owner = providers.Owner{UID: "u1", Namespace: "ns", Name: "app", Kind: "App"}

func TestPluginCallsRoundTrip(t *testing.T) {
	t.Parallel()
	p, logs := startPlugin(t, "fake")

	name, settings, err := p.ExternalName(context.Background(), providers.Request{Name: "data", Owner: owner}, 2)
	require.NoError(t, err)
	assert.Equal(t, "data-u1-2", name)
	assert.Equal(t, map[string]string{"project": "p1"}, settings)

	req := providers.Request{Name: "data", ExternalName: name, Owner: owner, Settings: settings,
		Spec: map[string]any{"location": "EU", "versions": int64(3), "ratio": 0.5, "tags": []any{"a", true}}}
	obs, err := p.Apply(context.Background(), req)
	require.NoError(t, err)
	assert.True(t, obs.Exists)
	assert.True(t, obs.Ready)
	// Whole numbers come back as int64, as the engine decodes templates.
	assert.Equal(t, map[string]any{
		"name":     "data-u1-2",
		"spec":     map[string]any{"location": "EU", "versions": int64(3), "ratio": 0.5, "tags": []any{"a", true}},
		"settings": map[string]any{"project": "p1"},
		"owner":    "ns/app",
	}, obs.State)
	assert.Equal(t, map[string][]byte{"password": []byte(secret)}, obs.Sensitive)

	require.NoError(t, p.Delete(context.Background(), providers.Request{Name: "data", ExternalName: name, Owner: owner}))

	// The plugin's stderr is in the engine's log, with the provider's name.
	require.Eventually(t, func() bool {
		return strings.Contains(logs.String(), `"msg"="provider plugin output" "provider"="fake" "line"="time=`)
	}, waitFor, 10*time.Millisecond, "log:\n%s", logs)
	assert.Contains(t, logs.String(), "plugin serving")
}

func TestPluginErrorsKeepTheirClass(t *testing.T) {
	t.Parallel()
	p, _ := startPlugin(t, "fake")
	apply := func(do string) error {
		_, err := p.Apply(context.Background(), providers.Request{Name: "data", ExternalName: "x", Owner: owner, Spec: map[string]any{"do": do}})
		return err
	}
	_, _, nameErr := p.ExternalName(context.Background(), providers.Request{Name: "data", Owner: owner, Spec: map[string]any{"do": "terminal"}}, 0)
	deleteErr := p.Delete(context.Background(), providers.Request{Name: "data", ExternalName: "x", Spec: map[string]any{"do": "retryable"}})

	for _, tc := range []struct {
		name       string
		err        error
		classified bool
		reason     string
		retryable  bool
		text       string
	}{
		{"terminal", apply("terminal"), true, providers.ReasonNameConflict, false, "NameConflict: bucket x is not ours"},
		{"retryable", apply("retryable"), true, providers.ReasonRateLimited, true, "RateLimited: slow down"},
		{"unclassified", apply("plain"), false, providers.ReasonProviderError, true, "something broke"},
		{"external name", nameErr, true, providers.ReasonInvalidName, false, `InvalidName: name "data" is too long`},
		{"delete", deleteErr, true, providers.ReasonUnavailable, true, "Unavailable: try later"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Error(t, tc.err)
			assert.Equal(t, tc.text, tc.err.Error())
			var pe *providers.Error
			assert.Equal(t, tc.classified, errors.As(tc.err, &pe))
			reason, retryable := providers.Classify(tc.err)
			assert.Equal(t, tc.reason, reason)
			assert.Equal(t, tc.retryable, retryable)
		})
	}
}

func TestPluginCallsCarryTheDeadline(t *testing.T) {
	t.Parallel()
	p, logs := startPlugin(t, "fake")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	want, _ := ctx.Deadline()
	obs, err := p.Apply(ctx, providers.Request{Name: "data", ExternalName: "x", Spec: map[string]any{"do": "deadline"}})
	require.NoError(t, err)
	got := time.Unix(0, obs.State["deadline"].(int64))
	// gRPC sends the time left, and the plugin adds it to its clock: the
	// same instant, give or take the call's own latency.
	assert.WithinDuration(t, want, got, 5*time.Second)

	// A call past its deadline ends, on both sides.
	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = p.Apply(short, providers.Request{Name: "data", ExternalName: "x", Spec: map[string]any{"do": "block"}})
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	reason, retryable := providers.Classify(err)
	assert.Equal(t, providers.ReasonTimeout, reason)
	assert.True(t, retryable)
	assert.Equal(t, "Timeout: provider fake: Apply: context deadline exceeded", err.Error())
	require.Eventually(t, func() bool {
		// The plugin's side ends on its own copy of the deadline or on the
		// engine's cancellation of the stream, whichever it sees first.
		return strings.Contains(logs.String(), "apply ended by the caller: context ")
	}, waitFor, 10*time.Millisecond, "log:\n%s", logs)
}

// TestPluginExternalNameEndsWithItsCaller: a reconcile cancelled during
// a slow ExternalName gets its answer within a second, and the plugin's
// side sees the cancellation.
func TestPluginExternalNameEndsWithItsCaller(t *testing.T) {
	t.Parallel()
	p, logs := startPlugin(t, "fake")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, _, err := p.ExternalName(ctx, providers.Request{Name: "data", Owner: owner, Spec: map[string]any{"do": "block"}}, 0)
		done <- err
	}()
	require.Eventually(t, func() bool {
		return strings.Contains(logs.String(), "external name blocks")
	}, waitFor, 10*time.Millisecond, "log:\n%s", logs)
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, "Timeout: provider fake: ExternalName: context canceled", err.Error())
	case <-time.After(time.Second):
		t.Fatal("ExternalName went on after its caller was cancelled")
	}
	require.Eventually(t, func() bool {
		return strings.Contains(logs.String(), "external name ended by the caller: context canceled")
	}, waitFor, 10*time.Millisecond, "log:\n%s", logs)
}

// TestPluginHandshakeRefusesTheOldProtocol: a plugin built before Plan
// (protocol 2) is refused, naming both versions.
func TestPluginHandshakeRefusesTheOldProtocol(t *testing.T) {
	t.Parallel()
	require.Equal(t, 3, ProtocolVersion)
	p, logs := newTestPlugin(t, "fake", envTestVersion+"=2")
	require.Eventually(t, func() bool {
		err := p.Health()
		return err != nil && strings.Contains(err.Error(), self(t)+" speaks plugin protocol 2, this engine 3: install the plugin built with this engine")
	}, waitFor, 10*time.Millisecond, "log:\n%s", logs)
	_, _, err := p.ExternalName(context.Background(), providers.Request{Name: "data", Owner: owner}, 0)
	reason, retryable := providers.Classify(err)
	assert.Equal(t, providers.ReasonProviderUnavailable, reason)
	assert.True(t, retryable)
	assert.Contains(t, err.Error(), "speaks plugin protocol 2, this engine 3")
}

func TestPluginSensitiveOutputsAreNeverLogged(t *testing.T) {
	t.Parallel()
	p, logs := startPlugin(t, "fake")
	obs, err := p.Apply(context.Background(), providers.Request{Name: "data", ExternalName: "x", Owner: owner})
	require.NoError(t, err)
	require.Equal(t, secret, string(obs.Sensitive["password"]))
	_, err = p.Apply(context.Background(), providers.Request{Name: "data", ExternalName: "x", Owner: owner, Spec: map[string]any{"do": "crash"}})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), secret)
	require.Eventually(t, func() bool { return p.Status().Up && p.Status().Restarts == 1 }, waitFor, 10*time.Millisecond)
	obs, err = p.Apply(context.Background(), providers.Request{Name: "data", ExternalName: "x", Owner: owner})
	require.NoError(t, err)
	require.Equal(t, secret, string(obs.Sensitive["password"]))
	assert.NotContains(t, logs.String(), secret)
	assert.NotContains(t, logs.String(), "aHVudGVyMi1zM2NyM3QtdmFsdWU") // nor its base64, as it crosses the wire
}

func TestPluginCrashIsUnavailableUntilRestarted(t *testing.T) {
	t.Parallel()
	p, logs := startPlugin(t, "fake")
	first := p.Status().Pid

	_, err := p.Apply(context.Background(), providers.Request{Name: "data", ExternalName: "x", Spec: map[string]any{"do": "crash"}})
	require.Error(t, err)
	reason, retryable := providers.Classify(err)
	assert.Equal(t, providers.ReasonProviderUnavailable, reason)
	assert.True(t, retryable)
	assert.True(t, strings.HasPrefix(err.Error(), "ProviderUnavailable: provider fake: plugin unavailable: "), err.Error())

	require.Eventually(t, func() bool {
		st := p.Status()
		return st.Up && st.Restarts == 1 && st.Pid != first
	}, waitFor, 10*time.Millisecond, "restarted; log:\n%s", logs)
	assert.Contains(t, logs.String(), `"msg"="provider plugin down; restarting" "error"="exited: exit status 3" "provider"="fake"`)
	obs, err := p.Apply(context.Background(), providers.Request{Name: "data", ExternalName: "x", Owner: owner})
	require.NoError(t, err)
	assert.True(t, obs.Ready)
}

func TestPluginDownAnswersUnavailable(t *testing.T) {
	t.Parallel()
	p, _ := startPlugin(t, "fake")
	pid := p.Status().Pid
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	// Until it is back every call fails at once, retryable, and Health
	// says why; afterwards calls succeed again.
	require.Eventually(t, func() bool {
		_, err := p.Apply(context.Background(), providers.Request{Name: "data", ExternalName: "x"})
		reason, _ := providers.Classify(err)
		return reason == providers.ReasonProviderUnavailable
	}, waitFor, time.Millisecond)
	require.Eventually(t, func() bool { return p.Status().Restarts == 1 && p.Status().Up }, waitFor, 10*time.Millisecond)
	require.NoError(t, p.Health())
	_, err := p.Apply(context.Background(), providers.Request{Name: "data", ExternalName: "x"})
	require.NoError(t, err)
}

func TestPluginCallsWaitForTheFirstStart(t *testing.T) {
	t.Parallel()
	p := New(Options{Name: "fake", Path: self(t), Env: pluginEnv("fake")})
	applied := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		_, err := p.Apply(ctx, providers.Request{Name: "data", ExternalName: "x", Owner: owner})
		applied <- err
	}()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	select {
	case err := <-applied:
		require.NoError(t, err)
	case <-time.After(waitFor):
		t.Fatal("Apply made before the start never returned")
	}
}

func TestPluginHandshakeRefusesAnotherProtocol(t *testing.T) {
	t.Parallel()
	p, logs := newTestPlugin(t, "fake", envTestVersion+"=99")
	want := "provider fake: plugin " + self(t) + " down (restarts: "
	require.Eventually(t, func() bool {
		err := p.Health()
		return err != nil && strings.Contains(err.Error(), self(t)+" speaks plugin protocol 99, this engine 3: install the plugin built with this engine")
	}, waitFor, 10*time.Millisecond, "log:\n%s", logs)
	assert.False(t, p.Status().Up)
	assert.True(t, strings.HasPrefix(p.Health().Error(), want), p.Health().Error())
	_, err := p.Apply(context.Background(), providers.Request{Name: "data", ExternalName: "x"})
	reason, retryable := providers.Classify(err)
	assert.Equal(t, providers.ReasonProviderUnavailable, reason)
	assert.True(t, retryable)
	assert.Contains(t, err.Error(), "speaks plugin protocol 99, this engine 3")
}

func TestPluginHandshakeRefusesAnotherName(t *testing.T) {
	t.Parallel()
	p := New(Options{Name: "fake", Path: self(t), Env: pluginEnv("other"), MinBackoff: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	require.Eventually(t, func() bool {
		err := p.Health()
		return err != nil && strings.Contains(err.Error(), `serves provider "other", not "fake"`)
	}, waitFor, 10*time.Millisecond)
}

func TestPluginStopsWithTheEngine(t *testing.T) {
	t.Parallel()
	t.Run("SIGTERM on a clean stop", func(t *testing.T) {
		t.Parallel()
		logs := &logBuffer{}
		p := New(Options{Name: "fake", Path: self(t), Env: pluginEnv("fake"), Logger: logs.logger()})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		require.Eventually(t, func() bool { return p.Status().Up }, waitFor, 10*time.Millisecond)
		pid := p.Status().Pid
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(waitFor):
			t.Fatal("Run did not return")
		}
		assert.False(t, alive(pid))
		assert.Contains(t, logs.String(), `"line"="time=`)
		assert.Contains(t, logs.String(), `msg=\"plugin stopped\"`)
		assert.Contains(t, logs.String(), `"msg"="provider plugin stopped"`)
		assert.Equal(t, 0, p.Status().Restarts)
	})
	t.Run("the engine killed", func(t *testing.T) {
		t.Parallel()
		host := exec.Command(self(t))
		host.Env = append(os.Environ(), envTestHost+"=1", "GORACE=atexit_sleep_ms=0")
		out, err := host.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, host.Start())
		buf := make([]byte, 32)
		n, err := out.Read(buf)
		require.NoError(t, err)
		pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
		require.NoError(t, err)
		require.True(t, alive(pid))
		require.NoError(t, host.Process.Kill())
		_ = host.Wait()
		require.Eventually(t, func() bool { return !alive(pid) }, waitFor, 10*time.Millisecond, "plugin %d outlived its engine", pid)
	})
}

// alive is whether pid runs (a zombie waiting for its reaper does not).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true // no /proc: Kill answered
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) == 0 || fields[0] != "Z"
}

func TestServeStopsWhenStdinCloses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	done := make(chan error, 1)
	go func() {
		done <- serve(context.Background(), "fake", testProvider{}, filepath.Join(dir, "s.sock"), r, discardSlog())
	}()
	require.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(dir, "s.sock")); return err == nil }, waitFor, 10*time.Millisecond)
	require.NoError(t, w.Close())
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(waitFor):
		t.Fatal("serve did not return after stdin closed")
	}
}

func TestServeWithoutTheEngine(t *testing.T) {
	t.Parallel()
	err := serve(context.Background(), "gcs", testProvider{}, "", strings.NewReader(""), discardSlog())
	require.EqualError(t, err, "engine-provider-gcs is started by the engine, which finds it in its --provider-dir; ENGINE_PROVIDER_SOCKET is not set")
}

func TestDiscover(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name string, mode os.FileMode) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), mode))
	}
	write("engine-provider-gcs", 0o755)
	write("engine-provider-postgresql", 0o755)
	write("engine-provider-gcs~", 0o755)    // an editor's backup
	write("engine-provider-notes", 0o644)   // not executable
	write("engine-provider-Bad.exe", 0o755) // not a provider name
	write("engine", 0o755)
	require.NoError(t, os.Mkdir(filepath.Join(dir, "engine-provider-dir"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(dir, "engine-provider-gcs"), filepath.Join(dir, "engine-provider-link")))

	found, err := Discover(dir)
	require.NoError(t, err)
	assert.Equal(t, []Found{
		{Name: "gcs", Path: filepath.Join(dir, "engine-provider-gcs")},
		{Name: "link", Path: filepath.Join(dir, "engine-provider-link")},
		{Name: "postgresql", Path: filepath.Join(dir, "engine-provider-postgresql")},
	}, found)

	_, err = Discover(filepath.Join(dir, "missing"))
	require.EqualError(t, err, "provider directory: open "+filepath.Join(dir, "missing")+": no such file or directory")
}

func TestPluginMetrics(t *testing.T) {
	t.Parallel()
	p := New(Options{Name: "metered", Path: self(t), Env: pluginEnv("metered"), MinBackoff: 50 * time.Millisecond})
	up := func() float64 { return testutil.ToFloat64(metricUp.WithLabelValues("metered")) }
	restarts := func() float64 { return testutil.ToFloat64(metricRestarts.WithLabelValues("metered")) }
	assert.Equal(t, 0.0, up(), "the series exist from the start")
	assert.Equal(t, 0.0, restarts())

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Run(ctx); close(done) }()
	require.Eventually(t, func() bool { return up() == 1 }, waitFor, 10*time.Millisecond)
	require.NoError(t, syscall.Kill(p.Status().Pid, syscall.SIGKILL))
	require.Eventually(t, func() bool { return restarts() == 1 && up() == 1 && p.Status().Up }, waitFor, 10*time.Millisecond)
	cancel()
	<-done
	assert.Equal(t, 0.0, up(), "down once stopped")
}

// TestPluginPlan: a plan crosses the socket with its action, changes and
// reason; a sensitive change arrives without values whatever the plugin
// sent; an unknown action and a provider error are errors, classified.
func TestPluginPlan(t *testing.T) {
	t.Parallel()
	p, logs := startPlugin(t, "fake")
	plan, err := p.Plan(context.Background(), providers.Request{Name: "data", ExternalName: "data-u1-0", Owner: owner, Spec: map[string]any{}})
	require.NoError(t, err, "log:\n%s", logs)
	assert.Equal(t, providers.Plan{Action: providers.ActionUpdate, Changes: []providers.Change{
		{Field: "labels.team", From: `"a"`, To: `"b"`},
		{Field: "password", Sensitive: true},
	}}, plan)
	assert.NotContains(t, fmt.Sprint(plan), secret)

	plan, err = p.Plan(context.Background(), providers.Request{Name: "data", ExternalName: "data-u1-0", Owner: owner, Spec: map[string]any{"do": "refuse"}})
	require.NoError(t, err)
	assert.Equal(t, providers.Plan{Action: providers.ActionRefuse, Reason: "spec.location cannot change"}, plan)

	_, err = p.Plan(context.Background(), providers.Request{Name: "data", ExternalName: "data-u1-0", Owner: owner, Spec: map[string]any{"do": "retryable"}})
	reason, retryable := providers.Classify(err)
	assert.Equal(t, providers.ReasonUnavailable, reason)
	assert.True(t, retryable)

	_, err = p.Plan(context.Background(), providers.Request{Name: "data", ExternalName: "data-u1-0", Owner: owner, Spec: map[string]any{"do": "unknown"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `ProviderUnavailable: provider fake: plugin unavailable: Plan: unknown action "Explode"`)
}
