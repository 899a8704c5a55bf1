package plugin

import (
	"context"
	"os"
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

// TestPluginOnDemandStartsOnFirstCall: an OnDemand plugin runs no
// process and is healthy until a call needs it; the call starts it and
// succeeds, and from then on it is supervised as an eager one (a kill is
// followed by a restart).
func TestPluginOnDemandStartsOnFirstCall(t *testing.T) {
	t.Parallel()
	lazy, logs := runTestPlugin(t, Options{Name: "lazy", Env: pluginEnv("lazy"), OnDemand: true})
	started := func() float64 { return testutil.ToFloat64(metricStarted.WithLabelValues("lazy")) }
	up := func() float64 { return testutil.ToFloat64(metricUp.WithLabelValues("lazy")) }

	// While lazy's supervisor waits, another on-demand plugin is called,
	// starts and answers: lazy had that long to start, and every look at
	// it meanwhile finds it idle, with no process serving it.
	other, _ := runTestPlugin(t, Options{Name: "other", Env: pluginEnv("other"), OnDemand: true})
	answered := make(chan error, 1)
	go func() {
		_, err := other.Apply(context.Background(), providers.Request{Name: "data", ExternalName: "x", Owner: owner})
		answered <- err
	}()
	looks := 0
	for waiting := true; waiting || looks < 5; looks++ {
		select {
		case err := <-answered:
			require.NoError(t, err)
			waiting = false
		case <-time.After(10 * time.Millisecond):
		}
		st := lazy.Status()
		require.Equal(t, Status{Idle: true}, st, "look %d", looks)
		require.NoError(t, lazy.Health())
		require.Equal(t, "idle (not needed yet)", st.String())
		require.Equal(t, 0.0, started())
		require.Equal(t, 0.0, up())
		require.Empty(t, servingProcesses(t, "lazy"), "no process serves lazy")
	}
	require.True(t, other.Status().Up)
	require.Equal(t, 1.0, testutil.ToFloat64(metricStarted.WithLabelValues("other")))
	assert.NotContains(t, logs.String(), "provider plugin needed")

	// The first call, ExternalName here, starts it and is answered.
	name, _, err := lazy.ExternalName(context.Background(), providers.Request{Name: "data", Owner: owner}, 0)
	require.NoError(t, err)
	assert.Equal(t, "data-u1-0", name)
	st := lazy.Status()
	require.True(t, st.Up)
	assert.False(t, st.Idle)
	assert.Equal(t, servingProcesses(t, "lazy"), []int{st.Pid})
	assert.Equal(t, 1.0, started())
	assert.Equal(t, 1.0, up())
	assert.Equal(t, 1, strings.Count(logs.String(), `"msg"="provider plugin needed; starting it" "provider"="lazy" "path"="`+self(t)+`"`), logs.String())

	// Killed, it is restarted as an eager plugin is, and still answers.
	require.NoError(t, syscall.Kill(st.Pid, syscall.SIGKILL))
	require.Eventually(t, func() bool {
		now := lazy.Status()
		return now.Up && now.Restarts == 1 && now.Pid != st.Pid
	}, waitFor, 10*time.Millisecond, "restarted; log:\n%s", logs)
	_, err = lazy.Apply(context.Background(), providers.Request{Name: "data", ExternalName: name, Owner: owner})
	require.NoError(t, err)
	assert.Equal(t, 1.0, started())
	assert.Equal(t, 1, strings.Count(logs.String(), "provider plugin needed"), "needed once")
}

// TestPluginOnDemandCallEndsWhileStarting: a call whose context ends
// while the plugin it started is starting fails retryable, as a call to
// a starting eager plugin does; the start goes on and the next call is
// answered.
func TestPluginOnDemandCallEndsWhileStarting(t *testing.T) {
	t.Parallel()
	p, logs := runTestPlugin(t, Options{Name: "fake", Env: pluginEnv("fake"), OnDemand: true})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := p.Apply(ctx, providers.Request{Name: "data", ExternalName: "x", Owner: owner})
	require.Error(t, err)
	reason, retryable := providers.Classify(err)
	assert.Contains(t, []string{providers.ReasonProviderUnavailable, providers.ReasonTimeout}, reason, err.Error())
	assert.True(t, retryable)
	if reason == providers.ReasonProviderUnavailable {
		assert.Equal(t, "ProviderUnavailable: provider fake: plugin unavailable: not started yet", err.Error())
	}

	require.Eventually(t, func() bool { return p.Status().Up }, waitFor, 10*time.Millisecond, "started by the call; log:\n%s", logs)
	_, err = p.Apply(context.Background(), providers.Request{Name: "data", ExternalName: "x", Owner: owner})
	require.NoError(t, err)
}

// TestPluginOnDemandStopsWhileIdle: an idle plugin's Run returns when its
// context ends, without ever starting it; a call then fails retryable.
func TestPluginOnDemandStopsWhileIdle(t *testing.T) {
	t.Parallel()
	p := New(Options{Name: "idle", Path: self(t), Env: pluginEnv("idle"), OnDemand: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(waitFor):
		t.Fatal("Run did not return after its context ended")
	}
	_, err := p.Apply(context.Background(), providers.Request{Name: "data", ExternalName: "x"})
	reason, retryable := providers.Classify(err)
	assert.Equal(t, providers.ReasonProviderUnavailable, reason)
	assert.True(t, retryable)
	assert.Equal(t, 0.0, testutil.ToFloat64(metricStarted.WithLabelValues("idle")))
	assert.Empty(t, servingProcesses(t, "idle"))
}

// servingProcesses are the pids of this test binary's children that serve
// the plugin name (their environment says so), read from /proc.
func servingProcesses(t *testing.T, name string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	parent := strconv.Itoa(os.Getpid())
	want := envTestPlugin + "=" + name
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) < 2 || fields[1] != parent || fields[0] == "Z" {
			continue
		}
		environ, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(environ), "\x00") {
			if kv == want {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}
