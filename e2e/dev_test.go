package e2e

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
)

// devProc is a running `engine dev`.
type devProc struct {
	cmd  *exec.Cmd
	log  *syncBuffer
	done chan error
	// kubeconfigs are those of the printed export lines, in order: the
	// main cluster's, then each workload cluster's.
	kubeconfigs []string
}

// startDev runs `engine dev args...` and waits until it has printed want
// export KUBECONFIG lines.
func startDev(t *testing.T, want int, args ...string) *devProc {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "engine"), append([]string{"dev"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	d := &devProc{cmd: cmd, log: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stderr = d.log
	require.NoError(t, cmd.Start())
	kubeconfigLine := regexp.MustCompile(`export KUBECONFIG=(\S+)`)
	found := make(chan string, 16)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := kubeconfigLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	go func() {
		<-scanned // Wait closes stdout: read it all first
		d.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("engine dev log (tail):\n%s", tail(d.log.String(), 40))
		}
	})
	for len(d.kubeconfigs) < want {
		select {
		case k := <-found:
			d.kubeconfigs = append(d.kubeconfigs, k)
		case err := <-d.done:
			t.Fatalf("engine dev exited: %v", err)
		case <-time.After(2 * time.Minute):
			t.Fatalf("engine dev printed %d of %d KUBECONFIG lines within 2 minutes", len(d.kubeconfigs), want)
		}
	}
	return d
}

// kubectl runs kubectl against the cluster of the i-th printed kubeconfig.
func (d *devProc) kubectl(i int, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", d.kubeconfigs[i]}, args...)...).CombinedOutput()
	return string(out), err
}

// interrupt sends Ctrl-C and waits for a clean exit.
func (d *devProc) interrupt(t *testing.T) {
	t.Helper()
	require.NoError(t, d.cmd.Process.Signal(syscall.SIGINT))
	select {
	case err := <-d.done:
		assert.NoError(t, err, "Ctrl-C is a clean exit")
	case <-time.After(time.Minute):
		t.Fatal("engine dev did not stop within a minute of Ctrl-C")
	}
}

// TestEngineDev runs the README's main command: `engine dev` starts its own
// cluster with a local GCS emulator (engine-gcs-emulator) for the gcs
// plugin and a throwaway PostgreSQL server for the postgresql plugin; the
// examples work against it from another "shell"; Ctrl-C stops
// everything.
func TestEngineDev(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev")
	d := startDev(t, 1, "--templates", filepath.Join(repo, "examples/templates"), "--dir", dir)
	run := func(args ...string) (string, error) { return d.kubectl(0, args...) }
	out, err := run("apply", "-f", filepath.Join(repo, "examples/crs/"))
	require.NoError(t, err, out)
	// Every example together, as README and `engine dev` say: five
	// parents, each Ready, none claiming another's child.
	eventually(t, "every example Ready", 90*time.Second, func(ctx context.Context) (bool, error) {
		out, err := run("get", "mykinds,gcs,storefronts,webapps,teamapps", "-o", `jsonpath={range .items[*]}{.kind}={.status.conditions[?(@.type=="Ready")].status} {end}`)
		return strings.Count(out, "=True") == 5, err
	})
	out, err = run("get", "deployment", "checkout", "-o", `jsonpath={.spec.template.spec.containers[0].env[?(@.name=="TEAM")].value}`)
	require.NoError(t, err, out)
	assert.Equal(t, "checkout", out, "the TeamApp read examples/crs/team-settings.yaml")
	out, err = run("get", "gcs", "example", "-o", "jsonpath={.status.bucketFullName}")
	require.NoError(t, err)
	assert.Regexp(t, `^example-[0-9a-f]{8}$`, out, "a bucket in the local emulator")
	out, err = run("get", "webapps", "orders", "-o", "jsonpath={.status.database}")
	require.NoError(t, err)
	assert.Regexp(t, `^orders_[0-9a-f]{8}$`, out, "a database on the throwaway PostgreSQL server")
	out, err = run("get", "secret", "orders-db", "-o", "jsonpath={.data.username}")
	require.NoError(t, err)
	assert.NotEmpty(t, out, "the WebApp's connection Secret")

	cfg, err := clientcmd.BuildConfigFromFlags("", d.kubeconfigs[0])
	require.NoError(t, err)
	d.interrupt(t)
	assert.Contains(t, d.log.String(), "dev: stopping the local cluster")
	assert.Contains(t, d.log.String(), "dev: stopping PostgreSQL")
	_, err = run("--request-timeout=3s", "get", "ns")
	assert.Error(t, err, "the cluster at %s is gone", cfg.Host)
}

// TestEngineDevWorkloadCluster runs the README's multicluster command:
// `engine dev --workload-cluster west` starts a second control plane and
// registers it; a Tenant of examples/multicluster puts its namespace,
// quota and Deployment there, seen through the second printed
// kubeconfig, and becomes Ready once its pod there is; Ctrl-C stops both
// clusters, every process of either gone.
func TestEngineDevWorkloadCluster(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev")
	d := startDev(t, 2, "--templates", filepath.Join(repo, "examples/multicluster/templates"), "--dir", dir,
		"--workload-cluster", "west", "--gcs-emulator=false", "--postgres=false")
	mgmt := func(args ...string) (string, error) { return d.kubectl(0, args...) }
	west := func(args ...string) (string, error) { return d.kubectl(1, args...) }
	out, err := mgmt("get", "secret", "west", "-o", `jsonpath={.metadata.labels.engine\.cuengine\.dev/cluster}`)
	require.NoError(t, err, out)
	assert.Equal(t, "west", out, "the cluster Secret, labelled with the cluster's name")

	out, err = mgmt("apply", "-f", filepath.Join(repo, "examples/multicluster/tenant.yaml"))
	require.NoError(t, err, out)
	eventually(t, "the Tenant's Deployment in cluster west", 90*time.Second, func(ctx context.Context) (bool, error) {
		out, err := west("-n", "tenant-shop", "get", "deployment", "app", "-o", "jsonpath={.metadata.labels.app\\.kubernetes\\.io/managed-by}")
		return out == "engine", err
	})
	eventually(t, "the Tenant Ready", 90*time.Second, func(ctx context.Context) (bool, error) {
		out, err := mgmt("-n", "teams", "get", "tenant", "shop", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True", err
	})
	out, err = mgmt("-n", "teams", "get", "configmap", "shop-placement", "-o", "jsonpath={.data.cluster}")
	require.NoError(t, err, out)
	assert.Equal(t, "west", out, "the local child, beside the Tenant")
	out, err = mgmt("get", "namespace", "tenant-shop", "--ignore-not-found", "-o", "name")
	require.NoError(t, err, out)
	assert.Empty(t, out, "the tenant's namespace is in west, not in the management cluster")

	d.interrupt(t)
	log := d.log.String() // all of it: the process has exited
	assert.Contains(t, log, "dev: workload cluster west registered by Secret default/west")
	assert.Contains(t, log, "dev: stopping workload cluster west")
	assert.Contains(t, log, "dev: stopping the local cluster")
	_, err = west("--request-timeout=3s", "get", "ns")
	assert.Error(t, err, "cluster west is gone")
	_, err = mgmt("--request-timeout=3s", "get", "ns")
	assert.Error(t, err, "the management cluster is gone")
	assert.Empty(t, processesUnder(t, dir), "no process of either cluster is left")
}

// processesUnder lists the command lines of the running processes that
// name a path under dir (the control planes' data and certificates).
func processesUnder(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if strings.Trim(e.Name(), "0123456789") != "" {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue // gone meanwhile
		}
		line := strings.ReplaceAll(string(raw), "\x00", " ")
		if strings.Contains(line, dir+string(filepath.Separator)) {
			out = append(out, e.Name()+": "+line)
		}
	}
	return out
}
