package plugin

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cuengine/engine/providers"
)

// A plugin that hangs (SIGSTOP: its process lives, nothing answers) is
// down as soon as it misses a ping, its calls fail at once saying why, and
// after PingMisses pings it is killed and restarted; calls then succeed.
func TestPluginHangIsDownThenRestarted(t *testing.T) {
	t.Parallel()
	p, logs := runTestPlugin(t, Options{
		Name: "hangs", Env: pluginEnv("hangs"),
		PingInterval: 100 * time.Millisecond, PingTimeout: 300 * time.Millisecond, PingMisses: 3,
	})
	up := func() float64 { return testutil.ToFloat64(metricUp.WithLabelValues("hangs")) }
	require.Eventually(t, func() bool { return p.Status().Up }, waitFor, 10*time.Millisecond, "plugin up; log:\n%s", logs)
	hung := p.Status().Pid
	require.NoError(t, syscall.Kill(hung, syscall.SIGSTOP))
	t.Cleanup(func() { _ = syscall.Kill(hung, syscall.SIGKILL) })

	require.Eventually(t, func() bool { return !p.Status().Up }, waitFor, 10*time.Millisecond, "down; log:\n%s", logs)
	st := p.Status()
	require.Error(t, st.Err)
	assert.True(t, strings.HasPrefix(st.Err.Error(), "no answer to a ping within 300ms"), st.Err.Error())
	assert.Equal(t, 0.0, up())
	require.Error(t, p.Health())
	assert.Contains(t, p.Health().Error(), "provider hangs: plugin "+self(t)+" down (restarts: 0): no answer to a ping within 300ms")

	// Restarted: a new process answers, and calls succeed again.
	require.Eventually(t, func() bool {
		st := p.Status()
		return st.Up && st.Restarts == 1 && st.Pid != hung
	}, waitFor, 10*time.Millisecond, "restarted; log:\n%s", logs)
	assert.Equal(t, 1.0, up())
	obs, err := p.Apply(context.Background(), providers.Request{Name: "data", ExternalName: "x", Owner: owner})
	require.NoError(t, err)
	assert.True(t, obs.Ready)
	assert.Contains(t, logs.String(), `"msg"="provider plugin does not answer" "error"="no answer to a ping within 300ms (1 in a row)" "provider"="hangs"`)
	assert.Contains(t, logs.String(), `"msg"="provider plugin down; restarting" "error"="killed: no answer to a ping within 300ms (3 in a row)" "provider"="hangs"`)
	// The hung process and its group are gone, not left stopped.
	require.Eventually(t, func() bool { return syscall.Kill(hung, 0) != nil }, waitFor, 10*time.Millisecond, "the hung process is killed")
}

// While a plugin misses pings, calls fail at once with ProviderUnavailable
// saying why, instead of each waiting out its deadline.
func TestPluginHungAnswersUnavailable(t *testing.T) {
	t.Parallel()
	p, logs := runTestPlugin(t, Options{
		Name: "hangs-calls", Env: pluginEnv("hangs-calls"),
		PingInterval: 100 * time.Millisecond, PingTimeout: 300 * time.Millisecond, PingMisses: 1000,
	})
	require.Eventually(t, func() bool { return p.Status().Up }, waitFor, 10*time.Millisecond, "plugin up; log:\n%s", logs)
	hung := p.Status().Pid
	require.NoError(t, syscall.Kill(hung, syscall.SIGSTOP))
	t.Cleanup(func() { _ = syscall.Kill(hung, syscall.SIGCONT) })
	require.Eventually(t, func() bool { return !p.Status().Up }, waitFor, 10*time.Millisecond, "down; log:\n%s", logs)

	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	_, err := p.Apply(ctx, providers.Request{Name: "data", ExternalName: "x", Owner: owner})
	require.Error(t, err)
	assert.NoError(t, ctx.Err(), "the call failed at once, not at its deadline")
	reason, retryable := providers.Classify(err)
	assert.Equal(t, providers.ReasonProviderUnavailable, reason)
	assert.True(t, retryable)
	assert.True(t, strings.HasPrefix(err.Error(), "ProviderUnavailable: provider hangs-calls: plugin unavailable: no answer to a ping within 300ms ("), err.Error())

	// Answering again, it is up again: the same process, no restart.
	require.NoError(t, syscall.Kill(hung, syscall.SIGCONT))
	require.Eventually(t, func() bool { st := p.Status(); return st.Up && st.Pid == hung }, waitFor, 10*time.Millisecond, "up again; log:\n%s", logs)
	assert.Equal(t, 0, p.Status().Restarts)
	_, err = p.Apply(context.Background(), providers.Request{Name: "data", ExternalName: "x", Owner: owner})
	require.NoError(t, err)
	assert.Contains(t, logs.String(), `"msg"="provider plugin answers again" "provider"="hangs-calls"`)
}
