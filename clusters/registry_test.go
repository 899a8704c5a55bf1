package clusters

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/internal/localcluster"
)

// changes records the names OnChange is called with.
type changes struct {
	mu    sync.Mutex
	names []string
}

func (c *changes) add(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.names = append(c.names, name)
}

func (c *changes) count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, x := range c.names {
		if x == name {
			n++
		}
	}
	return n
}

// TestRegistryFollowsClusterSecrets runs a management and a workload
// control plane (two real apiservers): a Secret in the management
// cluster registers the workload one, whose client then works; a
// kubeconfig that runs a command, a cluster that does not answer and a
// removed Secret are each a typed error naming the cause, seen in Status
// and the metrics; Run returns once every cluster has stopped.
func TestRegistryFollowsClusterSecrets(t *testing.T) {
	if testing.Short() {
		t.Skip("needs two control planes (run without -short)")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mgmt, err := localcluster.Start(ctx, localcluster.Options{Progress: os.Stderr})
	require.NoError(t, err, "run `make assets` first")
	defer mgmt.Stop()
	west, err := localcluster.Start(ctx, localcluster.Options{Progress: os.Stderr})
	require.NoError(t, err)
	defer west.Stop()
	westKubeconfig, err := os.ReadFile(west.Kubeconfig)
	require.NoError(t, err)

	k, err := kubernetes.NewForConfig(mgmt.Config)
	require.NoError(t, err)
	const ns = "engine-system"
	_, err = k.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	secret := func(name, cluster string, kubeconfig []byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{contract.LabelCluster: cluster}},
			Data: map[string][]byte{contract.KeyKubeconfig: kubeconfig}}
	}
	_, err = k.CoreV1().Secrets(ns).Create(ctx, secret("west", "west", westKubeconfig), metav1.CreateOptions{})
	require.NoError(t, err)

	seen := &changes{}
	reg := New(Options{ProbeEvery: 200 * time.Millisecond, ProbeTimeout: time.Second, OnChange: seen.add, Logger: logr.Discard()})
	runCtx, stopRun := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- reg.Run(runCtx, Secrets{Client: k.CoreV1(), Namespace: ns}) }()
	defer func() { stopRun(); <-ran }()

	var westCluster interface{ GetClient() client.Client }
	require.Eventually(t, func() bool {
		cl, err := reg.Get("west")
		if err != nil {
			return false
		}
		westCluster = cl
		return true
	}, 30*time.Second, 50*time.Millisecond, "west registered and answering")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hello"}, Data: map[string]string{"from": "management"}}
	require.NoError(t, westCluster.GetClient().Create(ctx, cm))
	wk, err := kubernetes.NewForConfig(west.Config)
	require.NoError(t, err)
	got, err := wk.CoreV1().ConfigMaps("default").Get(ctx, "hello", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "management", got.Data["from"], "the registered cluster's client writes to the workload cluster")
	westCl, err := reg.Get("west")
	require.NoError(t, err)
	assert.Equal(t, float32(-1), westCl.GetConfig().QPS, "no client-side limit of 5 requests a second: the cluster's own limits govern")
	assert.Equal(t, 1.0, testutil.ToFloat64(metricUp.WithLabelValues("west")))
	assert.Positive(t, testutil.ToFloat64(metricLastSeen.WithLabelValues("west")))
	assert.GreaterOrEqual(t, seen.count("west"), 2, "added, then up")

	// A cluster that does not answer: registered, unreachable, retryable.
	_, err = k.CoreV1().Secrets(ns).Create(ctx, secret("gone", "gone", []byte(kubeconfig("https://127.0.0.1:1", "{token: abc}"))), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := reg.Get("gone")
		var u *UnreachableError
		return errors.As(err, &u) && u.Err.Error() != "not reached yet"
	}, 30*time.Second, 50*time.Millisecond)
	_, err = reg.Get("gone")
	assert.Contains(t, err.Error(), `cluster "gone" is unreachable: `)
	assert.Contains(t, err.Error(), "connection refused")
	assert.Equal(t, 0.0, testutil.ToFloat64(metricUp.WithLabelValues("gone")))
	_, err = reg.Get("west")
	require.NoError(t, err, "one cluster down leaves the others")

	// An address that answers every request with an error page (a proxy's,
	// say): unreachable, the status line said, the page not copied.
	const errorPage = "<html><body>upstream 10.0.3.7:6443 failed; session=s3cr3t</body></html>"
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, errorPage)
	}))
	defer page.Close()
	_, err = k.CoreV1().Secrets(ns).Create(ctx, secret("paged", "paged", []byte(kubeconfig(page.URL, "{token: abc}"))), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := reg.Get("paged")
		var u *UnreachableError
		return errors.As(err, &u) && u.Err.Error() != "not reached yet"
	}, 30*time.Second, 50*time.Millisecond)
	_, err = reg.Get("paged")
	assert.Equal(t, fmt.Sprintf(`cluster "paged" is unreachable: the server answered 500 Internal Server Error with a body that is not a Kubernetes Status (%d bytes, not shown; the engine logs it at debug level)`, len(errorPage)), err.Error())
	assert.NotContains(t, err.Error(), "s3cr3t")

	// The Secret edited to run a command: refused, naming the Secret.
	cur, err := k.CoreV1().Secrets(ns).Get(ctx, "west", metav1.GetOptions{})
	require.NoError(t, err)
	cur.Data[contract.KeyKubeconfig] = []byte(kubeconfig("https://127.0.0.1:6443", "{exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/steal}}"))
	_, err = k.CoreV1().Secrets(ns).Update(ctx, cur, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := reg.Get("west")
		return err != nil && err.Error() == `cluster "west" is unreachable: Secret engine-system/west: user "u" runs a command (exec: /bin/steal) for its credentials: the engine runs no command from a cluster Secret; use a token or a client certificate`
	}, 30*time.Second, 50*time.Millisecond)

	// Removed: said, never forgotten silently.
	require.NoError(t, k.CoreV1().Secrets(ns).Delete(ctx, "west", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := reg.Get("west")
		var u *UnknownError
		return errors.As(err, &u) && u.Removed
	}, 30*time.Second, 50*time.Millisecond)
	_, err = reg.Get("west")
	assert.Contains(t, err.Error(), `cluster "west" was removed (Secret engine-system/west deleted at `)
	var removed *Status
	for _, s := range reg.Status() {
		if s.Name == "west" {
			removed = &s
		}
	}
	require.NotNil(t, removed)
	assert.True(t, removed.Removed)
	_, err = reg.Get("north")
	assert.EqualError(t, err, `cluster "north" is not registered (a Secret labelled engine.cuengine.dev/cluster=north in the engine's namespace registers it)`)

	stopRun()
	select {
	case err := <-ran:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	ran <- nil // for the deferred receive
	assert.Equal(t, 0, testutil.CollectAndCount(metricUp, "engine_cluster_up"), "the series are dropped with the clusters")
}
