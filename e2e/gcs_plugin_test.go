package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestGcsPluginOutage takes the gcs plugin away from a running engine (the
// process killed, the executable gone so the restarts fail) and brings it
// back: meanwhile a new parent is Synced=False ProviderUnavailable, a
// deleted parent keeps its bucket and its finalizer, /readyz says which
// plugin is down; afterwards the new parent has exactly one bucket and the
// deleted one is gone with its bucket.
func TestGcsPluginOutage(t *testing.T) {
	emu := startEmulator(t)
	dir := templatesDir(t, "examples/templates/gcs.cue")
	installCRDs(t, dir)
	t.Setenv("STORAGE_EMULATOR_HOST", emu.Host())
	providerDir := t.TempDir()
	plugin := filepath.Join(providerDir, "engine-provider-gcs")
	copyFile(t, filepath.Join(bin, "engine-provider-gcs"), plugin)
	eng := startEngine(t, dir, "--provider-dir", providerDir, "--resource-resync", "2s")
	ns := namespace(t)
	apply := func(name string) {
		kubectlApply(t, ns, fmt.Sprintf(`
apiVersion: storage.matsumo.dev/v1
kind: Gcs
metadata: {name: %s}
spec: {projectID: my-project, bucketName: %s}
`, name, name))
	}
	ready := func(name string) {
		eventually(t, name+" Ready", 90*time.Second, func(ctx context.Context) (bool, error) {
			status, _, err := condition(ctx, gcsKind, ns, name, "Ready")
			return status == "True", err
		})
	}
	uidOf := func(name string) string {
		u, err := gcsParent(context.Background(), ns, name)
		require.NoError(t, err)
		return string(u.GetUID())
	}

	// Ready, and no plugin runs until a parent needs it.
	code, body := readyz(eng.probe)
	assert.Equal(t, 200, code)
	assert.Equal(t, "ok\nprovider gcs: idle (not needed yet)\n", body)
	assert.Zero(t, childNow(eng.cmd.Process.Pid, "engine-provider"), "the gcs plugin runs before anything needs it")

	apply("before")
	ready("before")
	beforeUID := uidOf("before")
	require.Len(t, bucketsOf(t, emu, beforeUID), 1)

	pid := childOf(t, eng.cmd.Process.Pid, "engine-provider")
	require.NoError(t, os.Remove(plugin))
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))

	apply("during")
	eventually(t, "during Synced=False ProviderUnavailable", 60*time.Second, func(ctx context.Context) (bool, error) {
		status, why, err := condition(ctx, gcsKind, ns, "during", "Synced")
		return status == "False" && strings.HasPrefix(why, "ProviderUnavailable: "), err
	})
	_, why, err := condition(context.Background(), gcsKind, ns, "during", "Synced")
	require.NoError(t, err)
	assert.Contains(t, why, "provider gcs: plugin unavailable: ")
	code, body = readyz(eng.probe)
	assert.Equal(t, 500, code)
	assert.Contains(t, body, "provider gcs: plugin "+plugin+" down (restarts: ")

	// Deleting a parent while its provider is down deletes nothing.
	kubectl(t, "-n", ns, "delete", "gcs", "before", "--wait=false")
	eventually(t, "before's deletion waiting for its provider", 60*time.Second, func(ctx context.Context) (bool, error) {
		status, why, err := condition(ctx, gcsKind, ns, "before", "Synced")
		return status == "False" && strings.Contains(why, "ProviderUnavailable"), err
	})
	u, err := gcsParent(context.Background(), ns, "before")
	require.NoError(t, err)
	assert.NotNil(t, u.GetDeletionTimestamp())
	assert.Len(t, bucketsOf(t, emu, beforeUID), 1, "the bucket is kept while its provider is down")

	copyFile(t, filepath.Join(bin, "engine-provider-gcs"), plugin)
	ready("during")
	u, err = gcsParent(context.Background(), ns, "during")
	require.NoError(t, err)
	physical, _, _ := unstructured.NestedString(u.Object, "status", "bucketFullName")
	assert.Equal(t, []string{physical}, bucketsOf(t, emu, uidOf("during")))
	eventually(t, "before deleted", 60*time.Second, func(ctx context.Context) (bool, error) {
		_, err := gcsParent(ctx, ns, "before")
		return apierrors.IsNotFound(err), nil
	})
	assert.Empty(t, bucketsOf(t, emu, beforeUID))
	eventually(t, "/readyz ok", 30*time.Second, func(context.Context) (bool, error) {
		code, _ := readyz(eng.probe)
		return code == 200, nil
	})
	// Deleted while this engine runs, so that no later test's engine finds it.
	kubectl(t, "-n", ns, "delete", "gcs", "during", "--wait=true", "--timeout=60s")
	all, err := emu.Buckets(context.Background())
	require.NoError(t, err)
	assert.Empty(t, all, "no bucket left")
	log := eng.log.String()
	assert.Equal(t, 1, strings.Count(log, `"msg":"provider plugin needed; starting it"`), "started on demand, once")
	assert.Contains(t, log, `"msg":"provider plugin down; restarting"`)
	assert.Contains(t, log, `"provider":"gcs"`)
}

// TestGcsPluginHang stops the gcs plugin (SIGSTOP: a hang, the process
// still there) under a running engine while parents are created: the
// plugin is down on /readyz within seconds, killed and restarted, and
// every parent then has exactly one bucket.
func TestGcsPluginHang(t *testing.T) {
	emu := startEmulator(t)
	dir := templatesDir(t, "examples/templates/gcs.cue")
	installCRDs(t, dir)
	t.Setenv("STORAGE_EMULATOR_HOST", emu.Host())
	eng := startEngine(t, dir, "--provider-dir", filepath.Join(bin), "--resource-resync", "2s",
		"--provider-ping-interval", "1s", "--provider-ping-timeout", "1s")
	ns := namespace(t)
	apply := func(name string) {
		kubectlApply(t, ns, fmt.Sprintf(`
apiVersion: storage.matsumo.dev/v1
kind: Gcs
metadata: {name: %s}
spec: {projectID: my-project, bucketName: %s}
`, name, name))
	}
	apply("before")
	gcsReady(t, ns, "before")
	hung := childOf(t, eng.cmd.Process.Pid, "engine-provider")
	require.NoError(t, syscall.Kill(hung, syscall.SIGSTOP))
	t.Cleanup(func() { _ = syscall.Kill(hung, syscall.SIGKILL) })
	for i := range 3 {
		apply(fmt.Sprintf("during-%d", i))
	}

	eventually(t, "/readyz says the gcs plugin does not answer", 15*time.Second, func(context.Context) (bool, error) {
		code, body := readyz(eng.probe)
		return code == 500 && strings.Contains(body, "provider gcs: plugin "+filepath.Join(bin, "engine-provider-gcs")+" down (restarts: 0): no answer to a ping within 1s ("), nil
	})
	eventually(t, "the gcs plugin restarted", 30*time.Second, func(context.Context) (bool, error) {
		code, body := readyz(eng.probe)
		return code == 200 && strings.Contains(body, "provider gcs: up (pid ") && strings.Contains(body, ", restarts: 1)"), nil
	})
	assert.Error(t, syscall.Kill(hung, 0), "the hung plugin is killed")
	assert.NotEqual(t, hung, childNow(eng.cmd.Process.Pid, "engine-provider"))

	for _, name := range []string{"before", "during-0", "during-1", "during-2"} {
		uid, physical := gcsReady(t, ns, name)
		assert.Equal(t, []string{physical}, bucketsOf(t, emu, uid), "one bucket for %s", name)
	}
	// The parents that waited for it were told, by a Warning event.
	events := kubectl(t, "-n", ns, "get", "events", "--field-selector", "reason=ProviderUnavailable,type=Warning",
		"-o", `jsonpath={range .items[*]}{.involvedObject.name}: {.message}{"\n"}{end}`)
	for i := range 3 {
		assert.True(t, slices.ContainsFunc(strings.Split(events, "\n"), func(line string) bool {
			return strings.HasPrefix(line, fmt.Sprintf("during-%d: ", i)) && strings.Contains(line, "provider gcs: plugin unavailable: ")
		}), "a ProviderUnavailable event on during-%d; events:\n%s", i, events)
	}
	log := eng.log.String()
	assert.Contains(t, log, `"msg":"provider plugin does not answer"`)
	assert.Contains(t, log, `"error":"killed: no answer to a ping within 1s (3 in a row)"`)
	for _, name := range []string{"before", "during-0", "during-1", "during-2"} {
		kubectl(t, "-n", ns, "delete", "gcs", name, "--wait=true", "--timeout=60s")
	}
	all, err := emu.Buckets(context.Background())
	require.NoError(t, err)
	assert.Empty(t, all, "no bucket left")
}

// childOf is the pid of the child process of parent whose command starts
// with comm, once there is one.
func childOf(t *testing.T, parent int, comm string) int {
	t.Helper()
	var found int
	eventually(t, "the "+comm+" child of the engine", 30*time.Second, func(context.Context) (bool, error) {
		found = childNow(parent, comm)
		return found != 0, nil
	})
	return found
}

// childNow is the pid of a child process of parent whose command starts
// with comm, 0 if there is none now.
func childNow(parent int, comm string) int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(stat)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		fields := strings.Fields(s[end+1:])
		if len(fields) > 1 && fields[1] == strconv.Itoa(parent) && strings.HasPrefix(s[open+1:end], comm[:min(len(comm), 15)]) {
			return pid
		}
	}
	return 0
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	require.NoError(t, err)
	defer in.Close()
	out, err := os.OpenFile(to+".tmp", os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
	require.NoError(t, os.Rename(to+".tmp", to))
}
