package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/cuengine/engine/internal/localcluster"
	"github.com/cuengine/engine/templates"
)

// One full cluster serves every test of the package.
var (
	cluster *localcluster.Cluster
	kube    kubernetes.Interface
	dyn     dynamic.Interface
	bin     string // the directory holding engine, kubectl and the control plane
	repo    string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		// Every test here runs bin/engine against the full local cluster:
		// the fast lane (go test -short, make test-unit) skips the package
		// before building or starting anything.
		fmt.Println("e2e: skipped: needs a full local cluster (run without -short)")
		return 0
	}
	var err error
	if bin, err = localcluster.AssetsDir(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	repo = filepath.Dir(bin)
	if err := buildEngine(); err != nil {
		fmt.Fprintln(os.Stderr, "building bin/engine:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cluster, err = localcluster.Start(ctx, localcluster.Options{Full: true, Progress: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the local cluster:", err)
		return 1
	}
	defer cluster.Stop()
	kube = kubernetes.NewForConfigOrDie(cluster.Config)
	dyn = dynamic.NewForConfigOrDie(cluster.Config)
	return m.Run()
}

// buildEngine builds bin/engine and its provider plugins beside it from
// this checkout, so the tests always run the code under test (go's build
// cache makes it quick when unchanged).
func buildEngine() error {
	cmd := exec.Command("go", "build", "-o", bin+string(filepath.Separator), "./cmd/engine", "./cmd/engine-provider-gcs", "./cmd/engine-provider-postgresql", "./cmd/engine-gcs-emulator")
	cmd.Dir = repo
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

// execCommand is exec.Command, named for the one-shot commands of tests.
var execCommand = exec.Command

// kubectl runs the real kubectl against the cluster.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := kubectlErr(args...)
	require.NoError(t, err, "kubectl %s: %s", strings.Join(args, " "), out)
	return out
}

// kubectlTimeout bounds one kubectl command: an apply of a hundred
// objects on a loaded machine takes more than a minute.
const kubectlTimeout = 3 * time.Minute

func kubectlErr(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), kubectlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", cluster.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// kubectlApply pipes a manifest into kubectl apply.
func kubectlApply(t *testing.T, ns, manifest string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kubectlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), "--kubeconfig", cluster.Kubeconfig, "-n", ns, "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(manifest)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "kubectl apply: %s", out)
}

// engineProc is a running `engine run` process.
type engineProc struct {
	cmd   *exec.Cmd
	log   *syncBuffer
	probe string // host:port of /healthz and /readyz
	done  chan struct{}
}

// startEngine runs bin/engine against the cluster with the templates in
// dir, until the test ends.
func startEngine(t *testing.T, dir string, extra ...string) *engineProc {
	t.Helper()
	return launchEngine(t, t, dir, extra...)
}

// launchEngine is startEngine with the process's lifetime bound to owner,
// which may outlive t (a subtest that restarts the engine for its parent).
func launchEngine(t, owner *testing.T, dir string, extra ...string) *engineProc {
	t.Helper()
	probe := freeAddr(t)
	args := []string{"run", "--templates", dir, "--kubeconfig", cluster.Kubeconfig,
		"--metrics-bind-address", "0", "--health-probe-bind-address", probe}
	if !slices.ContainsFunc(extra, func(a string) bool { return strings.HasPrefix(a, "--revision-namespace") }) {
		// Each test's template revisions apart from the others' (the
		// tests share kinds); every engine of one test shares them.
		args = append(args, "--revision-namespace", revisionNamespace(owner))
	}
	args = append(args, extra...) // a later --kubeconfig wins
	p := &engineProc{cmd: exec.Command(filepath.Join(bin, "engine"), args...), log: &syncBuffer{}, probe: probe, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	p.cmd.Env = os.Environ()
	require.NoError(t, p.cmd.Start())
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	owner.Cleanup(func() {
		p.stop()
		if owner.Failed() {
			owner.Logf("engine log (tail):\n%s", tail(p.log.String(), 60))
		}
	})
	eventually(t, "the engine to be ready", time.Minute, func(ctx context.Context) (bool, error) {
		select {
		case <-p.done:
			return false, fmt.Errorf("engine exited: %s", tail(p.log.String(), 20))
		default:
		}
		resp, err := http.Get("http://" + probe + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	return p
}

// stop ends the process with SIGTERM (SIGKILL after 10s) and waits for it.
func (p *engineProc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// kill ends the process with SIGKILL, as a crash would.
func (p *engineProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// templatesDir copies template files into a fresh directory the test owns.
func templatesDir(t *testing.T, files ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(repo, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644))
	}
	return dir
}

// installCRDs installs the CRDs generated from a templates directory with
// `engine crds | kubectl apply`, the documented path.
func installCRDs(t *testing.T, dir string) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	out, err := exec.Command(filepath.Join(bin, "engine"), "crds", "--templates", dir).Output()
	require.NoError(t, err)
	kubectlApply(t, "default", string(out))
	set, err := templates.Load(dir)
	require.NoError(t, err)
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, tm := range set.Templates() {
		crds = append(crds, tm.CRD())
		kubectl(t, "wait", "--for=condition=Established", "--timeout=60s", "crd/"+tm.CRD().Name)
	}
	return crds
}

// revisionNamespace returns the namespace of a test's template revisions,
// creating it the first time.
func revisionNamespace(t *testing.T) string {
	t.Helper()
	sum := sha256.Sum256([]byte(t.Name()))
	name := "revisions-" + hex.EncodeToString(sum[:])[:12]
	if out, err := kubectlErr("create", "namespace", name); err != nil && !strings.Contains(out, "AlreadyExists") {
		t.Fatalf("creating namespace %s: %v: %s", name, err, out)
	}
	return name
}

// namespace creates a namespace named for the test.
func namespace(t *testing.T) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	kubectl(t, "create", "namespace", name)
	return name
}

// eventually polls cond until it holds, failing after timeout.
func eventually(t *testing.T, what string, timeout time.Duration, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		last = err
		return ok && err == nil, nil
	})
	require.NoError(t, err, "waiting for %s (last error: %v)", what, last)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

func tail(s string, lines int) string {
	all := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// syncBuffer is a bytes.Buffer safe for the process's writers and the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var _ io.Writer = (*syncBuffer)(nil)
