package e2e

import (
	"bufio"
	"context"
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

// TestEngineDev runs the README's main command: `engine dev` starts its own
// cluster with a local GCS emulator (engine-gcs-emulator) for the gcs
// plugin and a throwaway PostgreSQL server for the postgresql plugin; the
// examples work against it from another "shell"; Ctrl-C stops
// everything.
func TestEngineDev(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev")
	cmd := exec.Command(filepath.Join(bin, "engine"), "dev", "--templates", filepath.Join(repo, "examples/templates"), "--dir", dir)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	log := &syncBuffer{}
	cmd.Stderr = log
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("engine dev log (tail):\n%s", tail(log.String(), 40))
		}
	})

	kubeconfigLine := regexp.MustCompile(`export KUBECONFIG=(\S+)`)
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := kubeconfigLine.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	var kubeconfig string
	select {
	case kubeconfig = <-found:
	case err := <-done:
		t.Fatalf("engine dev exited: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("engine dev printed no KUBECONFIG line within 2 minutes")
	}
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
		return string(out), err
	}
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

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	select {
	case err := <-done:
		assert.NoError(t, err, "Ctrl-C is a clean exit")
	case <-time.After(time.Minute):
		t.Fatal("engine dev did not stop within a minute of Ctrl-C")
	}
	assert.Contains(t, log.String(), "dev: stopping the local cluster")
	assert.Contains(t, log.String(), "dev: stopping PostgreSQL")
	_, err = run("--request-timeout=3s", "get", "ns")
	assert.Error(t, err, "the cluster at %s is gone", cfg.Host)
}
