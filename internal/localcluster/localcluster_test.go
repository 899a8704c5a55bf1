package localcluster

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const (
	// wantVersion is the version the built apiserver must report.
	wantVersion = "v1.37.2"
	// testTimeout bounds each cluster test.
	testTimeout = 4 * time.Minute
)

// logWriter sends progress lines to the test log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// builtAssets returns the directory of the control-plane binaries that
// `make assets` builds. The fast lane (go test -short, make test-unit) runs
// before they are built and skips the tests that call it.
func builtAssets(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the control-plane binaries of `make assets` (run without -short)")
	}
	dir, err := AssetsDir()
	require.NoError(t, err, "the control-plane binaries are needed: run `make assets`")
	return dir
}

// startCluster starts a cluster for the test and stops it at cleanup.
func startCluster(t *testing.T, ctx context.Context, opts Options) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a control plane (run without -short)")
	}
	builtAssets(t)
	opts.Progress = logWriter{t}
	c, err := Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, c.Stop()) })
	return c
}

// kubectl runs bin/kubectl against kubeconfig and returns its output.
func kubectl(t *testing.T, ctx context.Context, kubeconfig string, args ...string) string {
	t.Helper()
	dir, err := AssetsDir()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	args = append([]string{"--kubeconfig", kubeconfig}, args...)
	out, err := exec.CommandContext(ctx, filepath.Join(dir, "kubectl"), args...).CombinedOutput()
	require.NoError(t, err, "kubectl %s: %s", strings.Join(args, " "), out)
	return string(out)
}

// clientset returns a typed client for cfg.
func clientset(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return cs
}

// requireVersion checks the version the apiserver reports.
func requireVersion(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	v, err := cs.Discovery().ServerVersion()
	require.NoError(t, err)
	require.Equal(t, wantVersion, v.GitVersion)
}

// eventually polls cond every 200ms until it holds or timeout passes.
func eventually(t *testing.T, ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, cond)
	require.NoError(t, err, "waiting %s", what)
}

// widgetCRD is a minimal namespaced CRD.
func widgetCRD() *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve,
				}},
			}},
		},
	}
}

func TestAssetsDirNamesMakeAssets(t *testing.T) {
	t.Setenv(assetsEnv, t.TempDir())
	_, err := AssetsDir()
	require.ErrorContains(t, err, "make assets")
}

func TestAssetsDirFindsRepoBin(t *testing.T) {
	t.Setenv(assetsEnv, "")
	dir := builtAssets(t)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	require.Equal(t, filepath.Join(root, "bin"), dir)
}

func TestBare(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	c := startCluster(t, ctx, Options{CRDs: []*apiextensionsv1.CustomResourceDefinition{widgetCRD()}})
	cs := clientset(t, c.Config)
	requireVersion(t, cs)

	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "greeting", Namespace: metav1.NamespaceDefault},
		Data:       map[string]string{"hello": "world"},
	}
	_, err := cs.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{})
	require.NoError(t, err)
	got, err := cs.CoreV1().ConfigMaps(cm.Namespace).Get(ctx, cm.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "world", got.Data["hello"])

	require.Contains(t, kubectl(t, ctx, c.Kubeconfig, "get", "ns", "default"), "default")
	require.Contains(t, kubectl(t, ctx, c.Kubeconfig, "get", "configmap", "greeting", "-o", "name"), "configmap/greeting")
	kubectl(t, ctx, c.Kubeconfig, "get", "widgets.example.com")

	dir := c.Dir
	require.NoError(t, c.Stop())
	require.NoError(t, c.Stop(), "a second Stop is harmless")
	require.NoDirExists(t, dir)
	require.Empty(t, processesMentioning(t, dir), "Stop left envtest processes running")
}

func TestFull(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()
	c := startCluster(t, ctx, Options{Full: true})
	cs := clientset(t, c.Config)
	requireVersion(t, cs)
	require.Contains(t, kubectl(t, ctx, c.Kubeconfig, "version"), "Server Version: "+wantVersion)

	kubectl(t, ctx, c.Kubeconfig, "create", "deployment", "web", "--image=nginx", "--replicas=2")
	deployments := cs.AppsV1().Deployments(metav1.NamespaceDefault)
	eventually(t, ctx, time.Minute, "for deployment web to have 2 ready replicas", func(ctx context.Context) (bool, error) {
		d, err := deployments.Get(ctx, "web", metav1.GetOptions{})
		return err == nil && d.Status.ReadyReplicas == 2, err
	})

	// What the node lifecycle controller does to every pod of a node whose
	// lease lapsed (a control plane down past the node monitor grace
	// period): Ready False. kwok reports it Ready again, as a kubelet does.
	pods, err := cs.CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	require.NoError(t, err)
	require.NotEmpty(t, pods.Items)
	pod := pods.Items[0]
	for i, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady {
			pod.Status.Conditions[i].Status = corev1.ConditionFalse
			pod.Status.Conditions[i].Reason = "NodeNotReady"
		}
	}
	_, err = cs.CoreV1().Pods(metav1.NamespaceDefault).UpdateStatus(ctx, &pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	eventually(t, ctx, time.Minute, "for pod "+pod.Name+" marked not Ready to be Ready again", func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(metav1.NamespaceDefault).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady {
				return cond.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})

	replicaSets := cs.AppsV1().ReplicaSets(metav1.NamespaceDefault)
	rsList, err := replicaSets.List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	require.NoError(t, err)
	require.Len(t, rsList.Items, 1)
	rsName := rsList.Items[0].Name

	kubectl(t, ctx, c.Kubeconfig, "delete", "deployment", "web")
	eventually(t, ctx, time.Minute, "for replicaset "+rsName+" to be garbage-collected", func(ctx context.Context) (bool, error) {
		_, err := replicaSets.Get(ctx, rsName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), ignoreNotFound(err)
	})
	eventually(t, ctx, time.Minute, "for the pods of web to be deleted", func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		return err == nil && len(pods.Items) == 0, err
	})

	pids := c.pids()
	require.Len(t, pids, 5)
	dir := c.Dir
	require.NoError(t, c.Stop())
	for _, pid := range pids {
		require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "process %d still exists after Stop", pid)
	}
	require.NoDirExists(t, dir)
}

// ignoreNotFound returns nil for a NotFound error, else err.
func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func TestStartFailureQuotesLog(t *testing.T) {
	p, err := startProcess("/bin", t.TempDir(), "sh", "-c", "echo boom-from-the-log; exit 3")
	require.NoError(t, err)
	<-p.done
	err = p.exited()
	require.Error(t, err)
	require.ErrorContains(t, err, "boom-from-the-log")
	require.NoError(t, p.stop())
}

func TestStopKillsProcessIgnoringSIGTERM(t *testing.T) {
	p, err := startProcess("/bin", t.TempDir(), "sh", "-c", `trap "" TERM; echo trapped; exec sleep 120`)
	require.NoError(t, err)
	eventually(t, t.Context(), 10*time.Second, "for the shell to ignore SIGTERM", func(context.Context) (bool, error) {
		return strings.Contains(logTail(p.logPath), "trapped"), nil
	})
	started := time.Now()
	require.NoError(t, p.stop())
	require.GreaterOrEqual(t, time.Since(started), stopGrace)
	require.ErrorIs(t, syscall.Kill(p.pid(), 0), syscall.ESRCH)
}

func TestFullStartFailureQuotesLogAndCleansUp(t *testing.T) {
	built := builtAssets(t)
	assets := t.TempDir()
	require.NoError(t, os.Symlink(filepath.Join(built, "etcd"), filepath.Join(assets, "etcd")))
	writeScript(t, assets, "kube-apiserver", "echo fake-apiserver-cannot-start; exit 1")
	for _, name := range []string{"kube-controller-manager", "kube-scheduler", "kwok"} {
		writeScript(t, assets, name, "exit 1")
	}
	t.Setenv(assetsEnv, assets)

	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err := Start(ctx, Options{Full: true, Dir: dir, Progress: logWriter{t}})
	t.Logf("Start failed as expected: %v", err)
	require.ErrorContains(t, err, "kube-apiserver exited unexpectedly")
	require.ErrorContains(t, err, "fake-apiserver-cannot-start")
	require.Empty(t, processesMentioning(t, dir), "Start left processes running after failing")
	require.DirExists(t, dir, "a given Dir is kept, with its logs")
}

// writeScript writes an executable shell script named name into dir.
func writeScript(t *testing.T, dir, name, body string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755))
}

// processesMentioning returns the pids of running processes whose command
// line contains s.
func processesMentioning(t *testing.T, s string) []int {
	t.Helper()
	cmdlines, err := filepath.Glob("/proc/[0-9]*/cmdline")
	require.NoError(t, err)
	var pids []int
	for _, path := range cmdlines {
		data, err := os.ReadFile(path)
		if err != nil || !strings.Contains(string(data), s) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		require.NoError(t, err)
		if pid != os.Getpid() {
			pids = append(pids, pid)
		}
	}
	return pids
}
