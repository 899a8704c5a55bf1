package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/internal/localcluster"
)

// syncBuffer is a bytes.Buffer safe to read while a process writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestStorageMigrationResumesOnCluster: 400 Apps stored in v1 (in a
// namespace the engine does not reconcile, so that only the migration
// writes them), the template moves storage to
// v2; the engine, SIGKILLed in the middle of the migration, resumes when
// it starts again and finishes: etcd holds v2 for every App and
// storedVersions is [v2].
func TestStorageMigrationResumesOnCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane (run without -short)")
	}
	cluster, err := localcluster.Start(context.Background(), localcluster.Options{Progress: os.Stderr})
	require.NoError(t, err, "starting the control plane (run `make assets` first)")
	t.Cleanup(func() { assert.NoError(t, cluster.Stop()) })
	c, err := client.New(cluster.Config, client.Options{Scheme: newScheme()})
	require.NoError(t, err)
	ctx := context.Background()
	for _, ns := range []string{"engine-system", "apps"} {
		require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{cluster.EtcdURL}, DialTimeout: 10 * time.Second})
	require.NoError(t, err)
	defer etcd.Close()

	tmpl := t.TempDir()
	require.NoError(t, os.CopyFS(tmpl, os.DirFS("testdata/conversion")))
	appCUE := filepath.Join(tmpl, "app.cue")
	edit(t, appCUE, "v2: storage: true", "v2: {}")
	edit(t, appCUE, "v1: {\n", "v1: {\n\t\tstorage: true\n")
	port := freePort(t)
	// The engine reconciles only engine-system: its status writes would
	// store the Apps of apps in v2 themselves; the migration covers every
	// namespace.
	args := []string{"run", "--templates", tmpl, "--kubeconfig", cluster.Kubeconfig, "--install-crds", "--namespace", "engine-system",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		"--webhook-port", fmt.Sprint(port), "--webhook-url", fmt.Sprintf("https://localhost:%d", port),
		"--webhook-namespace", "engine-system", "--webhook-cert-dir", t.TempDir()}
	// start runs the engine until kill, which ends it with SIGKILL.
	start := func() (logs *syncBuffer, kill func()) {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), asCLI+"=1")
		logs = &syncBuffer{}
		cmd.Stdout, cmd.Stderr = logs, logs
		require.NoError(t, cmd.Start())
		var once sync.Once
		kill = func() {
			once.Do(func() {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				if t.Failed() {
					t.Logf("engine logs:\n%s", logs.String())
				}
			})
		}
		t.Cleanup(kill)
		return logs, kill
	}
	logs, kill := start()

	crd := &apiextensionsv1.CustomResourceDefinition{}
	eventuallyCluster(t, "the CRD installed, v1 stored", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Name: "apps.apps.example.com"}, crd); err != nil {
			return false, err
		}
		conv := crd.Spec.Conversion
		return conv != nil && conv.Webhook.ClientConfig != nil && len(conv.Webhook.ClientConfig.CABundle) > 0, nil
	})
	// Four pages of 100, rewritten at 20 a second: the kill after the
	// first leaves seconds of work for the restart.
	const n = 400
	for i := range n {
		app := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps.example.com/v1", "kind": "App",
			"metadata": map[string]any{"name": fmt.Sprintf("app-%03d", i), "namespace": "apps"},
			"spec":     map[string]any{"image": "nginx", "replicas": int64(1)},
		}}
		require.NoError(t, c.Create(ctx, app))
	}
	stored := func(name string) string {
		resp, err := etcd.Get(ctx, "/registry/apps.example.com/apps/apps/"+name)
		require.NoError(t, err)
		require.Len(t, resp.Kvs, 1, name)
		var obj struct {
			APIVersion string `json:"apiVersion"`
		}
		require.NoError(t, json.Unmarshal(resp.Kvs[0].Value, &obj))
		return obj.APIVersion
	}
	require.Equal(t, "apps.example.com/v1", stored("app-000"))

	edit(t, appCUE, "v2: {}", "v2: storage: true")
	edit(t, appCUE, "\t\tstorage: true\n", "")
	// SIGKILL once the first page is rewritten, the rest not yet.
	page := regexp.MustCompile(`"msg":"migrating stored objects","crd":"apps.apps.example.com","to":"v2","from":\["v1","v2"\],"rewritten":(\d+),"current":(\d+),"failed":0,"done":false`)
	var first []string
	eventuallyCluster(t, "the migration under way", func(context.Context) (bool, error) {
		first = page.FindStringSubmatch(logs.String())
		return first != nil, nil
	})
	kill()
	t.Logf("killed after the first page: %s rewritten, %s already in v2", first[1], first[2])
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: "apps.apps.example.com"}, crd))
	require.Equal(t, []string{"v1", "v2"}, crd.Status.StoredVersions, "killed before the end")
	require.Equal(t, "apps.example.com/v2", stored("app-000"), "the first page rewritten")
	inV1 := 0
	for i := range n {
		if stored(fmt.Sprintf("app-%03d", i)) == "apps.example.com/v1" {
			inV1++
		}
	}
	t.Logf("stored in v1 when killed: %d", inV1)
	require.Positive(t, inV1, "killed in the middle")

	start()
	ctx60, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for ctx60.Err() == nil {
		require.NoError(t, c.Get(ctx, client.ObjectKey{Name: "apps.apps.example.com"}, crd))
		if slices.Equal(crd.Status.StoredVersions, []string{"v2"}) {
			break
		}
		<-time.After(200 * time.Millisecond)
	}
	require.Equal(t, []string{"v2"}, crd.Status.StoredVersions, "the restarted engine finished the migration")
	for i := range n {
		assert.Equal(t, "apps.example.com/v2", stored(fmt.Sprintf("app-%03d", i)))
	}
	list := &eventsv1.EventList{}
	require.NoError(t, c.List(ctx, list))
	var note string
	for _, ev := range list.Items {
		if ev.Reason == "StorageMigrated" {
			note = ev.Note
		}
	}
	var rewritten, current int
	_, err = fmt.Sscanf(note, "every App is stored in v2: %d rewritten, %d already there", &rewritten, &current)
	require.NoError(t, err, note)
	t.Logf("after the restart: %s", note)
	assert.Equal(t, n, rewritten+current)
	assert.GreaterOrEqual(t, current, 100, "the objects rewritten before the kill were not written again")
	assert.Positive(t, rewritten, "the restarted engine rewrote the rest")
}
