package e2e

// The engine's image (make image: hack/image.sh) run for real against the
// full cluster, the way a restricted pod runs it.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// podman runs podman with the settings this machine needs (hack/podman.sh).
func podman(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "podman", append([]string{"--cgroup-manager", "cgroupfs", "--runtime", "runc"}, args...)...)
}

// imageRef builds the image with `make image`'s script and returns its
// reference, or skips the test, loudly, where no container runtime can be
// installed.
func imageRef(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	setup := exec.CommandContext(ctx, "bash", filepath.Join(repo, "hack/podman.sh"))
	if out, err := setup.CombinedOutput(); err != nil {
		msg := fmt.Sprintf("SKIPPED: THE ENGINE'S IMAGE WAS NOT RUN: no container runtime could be installed here (hack/podman.sh: %v):\n%s", err, out)
		fmt.Fprintln(os.Stderr, "e2e: "+msg)
		t.Skip(msg)
	}
	var chart struct{ AppVersion string }
	raw, err := os.ReadFile(filepath.Join(repo, "charts/engine/Chart.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(raw, &chart))
	start := time.Now()
	build := exec.CommandContext(ctx, "bash", filepath.Join(repo, "hack/image.sh"))
	out, err := build.CombinedOutput()
	require.NoError(t, err, "make image: %s", out)
	ref := "ghcr.io/cuengine/engine:" + chart.AppVersion
	size, err := podman(ctx, "image", "inspect", "--format", "{{.Size}}", ref).Output()
	require.NoError(t, err)
	n, err := strconv.ParseInt(strings.TrimSpace(string(size)), 10, 64)
	require.NoError(t, err)
	t.Logf("make image: %s built in %s, %.1f MB", ref, time.Since(start).Round(100*time.Millisecond), float64(n)/1e6)
	return ref
}

// TestImage runs the image as the restricted pod runs it: a non-root user,
// a read-only root filesystem, no capabilities, no privilege escalation,
// the templates and a kubeconfig mounted read-only. It reconciles a MyKind
// and a Gcs (against the emulator), serves /readyz and, over HTTPS to a
// reader's token only, /metrics, and on SIGTERM stops cleanly, releasing
// its leader Lease.
func TestImage(t *testing.T) {
	ref := imageRef(t)
	emu := startEmulator(t)
	dir := templatesDir(t, "examples/templates/mykind.cue", "examples/templates/gcs.cue")
	installCRDs(t, dir)
	ns := namespace(t)
	t.Cleanup(func() { _, _ = kubectlErr("delete", "namespace", ns, "--wait=false") })

	// What the container mounts must be readable by its user (65532).
	require.NoError(t, os.Chmod(dir, 0o755))
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(kubeconfig, []byte(kubectl(t, "config", "view", "--flatten", "--minify")), 0o644))
	require.NoError(t, os.Chmod(filepath.Dir(kubeconfig), 0o755))

	role := ns + "-metrics-reader"
	kubectl(t, "create", "clusterrole", role, "--verb=get", "--non-resource-url=/metrics")
	t.Cleanup(func() { _, _ = kubectlErr("delete", "clusterrole", role, "--ignore-not-found") })

	probe, metrics := freeAddr(t), freeAddr(t)
	name := "engine-" + ns
	ctx := context.Background()
	_ = podman(ctx, "rm", "--force", name).Run()
	args := []string{"run", "--detach", "--name", name,
		"--network", "host", "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--user", "65532",
		"--volume", dir + ":/templates:ro", "--volume", kubeconfig + ":/etc/engine/kubeconfig:ro",
		"--env", "STORAGE_EMULATOR_HOST=" + emu.Host(),
		ref,
		// The image's entrypoint is /engine; these are its arguments.
		"run", "--templates", "/templates", "--kubeconfig", "/etc/engine/kubeconfig", "--namespace", ns,
		"--leader-elect", "--leader-election-namespace", ns, "--revision-namespace", ns,
		"--health-probe-bind-address", probe, "--metrics-bind-address", metrics, "--log-format", "json"}
	start := time.Now()
	out, err := podman(ctx, args...).CombinedOutput()
	require.NoError(t, err, "podman run: %s", out)
	logs := func() string {
		out, _ := podman(ctx, "logs", name).CombinedOutput()
		return string(out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("engine container log (tail):\n%s", tail(logs(), 60))
		}
		_ = podman(ctx, "rm", "--force", "--time", "0", name).Run()
	})

	eventually(t, "the container's /readyz", time.Minute, func(ctx context.Context) (bool, error) {
		resp, err := http.Get("http://" + probe + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	startup := time.Since(start)
	eventually(t, "the container to lead", time.Minute, func(ctx context.Context) (bool, error) {
		l, err := kube.CoordinationV1().Leases(ns).Get(ctx, "engine.cuengine.dev", metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", nil
	})
	t.Logf("the image's engine ready (/readyz 200) %s after podman run", startup.Round(10*time.Millisecond))

	// The engine's process: user and group 65532, no capability at all.
	top, err := podman(ctx, "top", name, "huser", "hgroup", "capeff").CombinedOutput()
	require.NoError(t, err, "podman top: %s", top)
	fields := strings.Fields(string(top))
	require.GreaterOrEqual(t, len(fields), 3, "podman top: %s", top)
	assert.Equal(t, []string{"65532", "65532", "none"}, fields[len(fields)-3:], "podman top huser hgroup capeff: %s", top)
	inspect, err := podman(ctx, "inspect", "--format", "{{.HostConfig.ReadonlyRootfs}} {{.HostConfig.CapDrop}} {{.HostConfig.SecurityOpt}}", name).Output()
	require.NoError(t, err)
	t.Logf("container: read-only root, dropped capabilities, security options: %s", strings.TrimSpace(string(inspect)))

	kubectlApply(t, ns, "apiVersion: webapp.my.domain/v1\nkind: MyKind\nmetadata: {name: imaged}\nspec: {deploymentName: imaged-web}\n")
	kubectl(t, "-n", ns, "apply", "-f", filepath.Join(repo, "examples/crs/gcs.yaml"))
	eventually(t, "the MyKind Ready", time.Minute, func(ctx context.Context) (bool, error) {
		status, _, err := condition(ctx, myKinds, ns, "imaged", "Ready")
		return status == "True", err
	})
	eventually(t, "the Gcs Ready, its bucket in the emulator", time.Minute, func(ctx context.Context) (bool, error) {
		status, _, err := condition(ctx, gcsKind, ns, "example", "Ready")
		return status == "True", err
	})
	u, err := gcsParent(ctx, ns, "example")
	require.NoError(t, err)
	assert.Len(t, bucketsOf(t, emu, string(u.GetUID())), 1)

	body := assertMetricsGuarded(t, metrics, ns, role)
	assert.Contains(t, body, `leader_election_master_status{name="engine.cuengine.dev"} 1`)

	// SIGTERM, as the kubelet sends: the engine stops within its grace
	// period, with status 0, and hands the Lease back on the way out.
	stopped := time.Now()
	out, err = podman(ctx, "kill", "--signal", "TERM", name).CombinedOutput()
	require.NoError(t, err, "podman kill: %s", out)
	waitCtx, cancel := context.WithTimeout(ctx, 40*time.Second)
	defer cancel()
	code, err := podman(waitCtx, "wait", name).Output()
	require.NoError(t, err, "the engine did not stop within 40s of SIGTERM")
	assert.Equal(t, "0", strings.TrimSpace(string(code)), "exit status after SIGTERM")
	t.Logf("stopped %s after SIGTERM", time.Since(stopped).Round(10*time.Millisecond))
	l, err := kube.CoordinationV1().Leases(ns).Get(ctx, "engine.cuengine.dev", metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "", "the Lease is released, not left to expire: held by %v", l.Spec.HolderIdentity)
	assert.NotContains(t, logs(), "Failed to release lock", "the Lease handed back")
}
