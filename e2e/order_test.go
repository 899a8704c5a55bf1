package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cuengine/engine/internal/gcsemulator"
)

// TestStorefrontDeletionOrder: the Storefront's Deployment reads its
// bucket's name, so deleting a Storefront removes the Deployment before the
// bucket, seen from the apiserver and the emulator; a Deployment held by a
// finalizer keeps the bucket, and the parent says why, until the finalizer
// goes; a template edit that makes a cycle is refused, the last good
// template kept serving.
func TestStorefrontDeletionOrder(t *testing.T) {
	emu := startEmulator(t)
	dir := t.TempDir()
	require.NoError(t, copyDir(repo+"/examples/templates/storefront", dir+"/storefront"))
	installCRDs(t, dir)
	t.Setenv("STORAGE_EMULATOR_HOST", emu.Host())
	eng := startEngine(t, dir)
	ns := namespace(t)

	t.Run("the Deployment goes before the bucket, and nothing leaks", func(t *testing.T) {
		kubectl(t, "-n", ns, "apply", "-f", repo+"/examples/crs/storefront.yaml")
		uid, bucket := storefrontReady(t, ns, "shop")
		watch := watchOrder(t, emu, ns, "shop", bucket)
		kubectl(t, "-n", ns, "delete", "storefront", "shop", "--wait=false")
		eventually(t, "the Storefront gone", 90*time.Second, func(ctx context.Context) (bool, error) {
			_, err := dyn.Resource(storefronts).Namespace(ns).Get(ctx, "shop", metav1.GetOptions{})
			return apierrors.IsNotFound(err), client404(err)
		})
		seen := watch.stop()
		assert.Empty(t, seen.violations, "never the bucket gone while the Deployment exists")
		assert.Positive(t, seen.both, "both seen together while the deletion went on")
		assert.Empty(t, bucketsOf(t, emu, uid), "no bucket leaked")
		eventually(t, "the Deployment gone", 30*time.Second, func(ctx context.Context) (bool, error) {
			_, err := kube.AppsV1().Deployments(ns).Get(ctx, "shop", metav1.GetOptions{})
			return apierrors.IsNotFound(err), client404(err)
		})
	})

	t.Run("a Deployment held by a finalizer keeps the bucket, and the parent says why", func(t *testing.T) {
		kubectlApply(t, ns, "apiVersion: apps.cuengine.dev/v1\nkind: Storefront\nmetadata: {name: held}\nspec: {projectID: p, bucketName: held}\n")
		uid, bucket := storefrontReady(t, ns, "held")
		kubectl(t, "-n", ns, "patch", "deployment", "held", "--type=merge", "-p", `{"metadata":{"finalizers":["example.com/hold"]}}`)
		kubectl(t, "-n", ns, "delete", "storefront", "held", "--wait=false")

		t.Cleanup(func() {
			if t.Failed() {
				out, _ := kubectlErr("-n", ns, "get", "storefront,deployment", "-o", "yaml")
				t.Logf("the objects:\n%s", out)
			}
		})
		want := "DeletionBlocked: Deployment held is held by finalizer example.com/hold; resource assets waits for it"
		eventually(t, "Synced=False DeletionBlocked naming the Deployment", 60*time.Second, func(ctx context.Context) (bool, error) {
			status, msg, err := condition(ctx, storefronts, ns, "held", "Synced")
			if err == nil && (status != "False" || msg != want) {
				err = fmt.Errorf("Synced is %s: %s", status, msg)
			}
			return err == nil, err
		})
		reason, ready := conditionReason(t, ns, "held", "Ready")
		assert.Equal(t, "Deleting", reason)
		assert.Contains(t, ready, "deleting: resource assets waits for Deployment held (being deleted; finalizers: example.com/hold)")
		assert.Equal(t, []string{bucket}, bucketsOf(t, emu, uid), "the bucket is kept while the Deployment is")
		_, err := kube.AppsV1().Deployments(ns).Get(context.Background(), "held", metav1.GetOptions{})
		require.NoError(t, err, "the Deployment is still there")

		kubectl(t, "-n", ns, "patch", "deployment", "held", "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
		eventually(t, "the Storefront gone", 60*time.Second, func(ctx context.Context) (bool, error) {
			_, err := dyn.Resource(storefronts).Namespace(ns).Get(ctx, "held", metav1.GetOptions{})
			return apierrors.IsNotFound(err), client404(err)
		})
		assert.Empty(t, bucketsOf(t, emu, uid), "the bucket goes once the Deployment has")
	})

	t.Run("a cycle is refused by a live reload, the last good template kept", func(t *testing.T) {
		path := filepath.Join(dir, "storefront", "storefront.cue")
		good, err := os.ReadFile(path)
		require.NoError(t, err)
		// The bucket now reads the Deployment, which reads the bucket.
		cycle := strings.Replace(string(good), "labels: app: _name\n", "labels: app: _name\n\t\tlabels: replicas: *\"\\(observed.app.spec.replicas)\" | \"0\"\n", 1)
		require.NotEqual(t, string(good), cycle)
		writeFile(t, path, cycle)
		eventually(t, "readyz to report the cycle", 30*time.Second, func(ctx context.Context) (bool, error) {
			code, body := readyz(eng.probe)
			return code == http.StatusInternalServerError && strings.Contains(body, "dependency cycle: children.app reads observed.assets"), nil
		})
		// The log reaches the test through a pipe, after readyz may answer.
		eventually(t, "the refusal logged", 30*time.Second, func(context.Context) (bool, error) {
			return strings.Contains(eng.log.String(), "template reload refused"), nil
		})

		// The last good template still serves: a new Storefront gets its
		// bucket, then its Deployment.
		kubectlApply(t, ns, "apiVersion: apps.cuengine.dev/v1\nkind: Storefront\nmetadata: {name: after}\nspec: {projectID: p, bucketName: after}\n")
		storefrontReady(t, ns, "after")

		writeFile(t, path, string(good))
		eventually(t, "readyz ok again", 30*time.Second, func(ctx context.Context) (bool, error) {
			code, _ := readyz(eng.probe)
			return code == http.StatusOK, nil
		})
	})
}

// storefrontReady waits for a Storefront to be Ready and returns its UID
// and physical bucket name.
func storefrontReady(t *testing.T, ns, name string) (uid, bucket string) {
	t.Helper()
	eventually(t, "Storefront "+name+" Ready", 60*time.Second, func(ctx context.Context) (bool, error) {
		u, err := dyn.Resource(storefronts).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		uid = string(u.GetUID())
		bucket, _, _ = unstructured.NestedString(u.Object, "status", "bucket")
		status, _, err := condition(ctx, storefronts, ns, name, "Ready")
		return bucket != "" && status == "True", err
	})
	return uid, bucket
}

func conditionReason(t *testing.T, ns, name, condType string) (string, string) {
	t.Helper()
	out := kubectl(t, "-n", ns, "get", "storefront", name, "-o",
		fmt.Sprintf(`jsonpath={.status.conditions[?(@.type=="%s")].reason}|{.status.conditions[?(@.type=="%s")].message}`, condType, condType))
	reason, msg, _ := strings.Cut(out, "|")
	return reason, msg
}

// client404 is nil for a NotFound, the error otherwise.
func client404(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// orderSeen is what watchOrder saw: how many looks found the Deployment
// and the bucket both there, and every look that found the bucket gone
// while the Deployment was still there.
type orderSeen struct {
	both       int
	violations []string
}

type orderWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	seen   orderSeen
}

// watchOrder looks, until stopped, at the bucket in the emulator and then
// at the Deployment in the apiserver. The bucket is read first: if it is
// gone before the Deployment is read, the bucket went first (reads of
// the apiserver are current), whatever happened between the two reads.
func watchOrder(t *testing.T, emu *gcsemulator.Emulator, ns, deployment, bucket string) *orderWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &orderWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		_ = wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			buckets, err := emu.Buckets(ctx)
			if err != nil {
				return false, nil
			}
			bucketThere := false
			for _, b := range buckets {
				bucketThere = bucketThere || b.Name == bucket
			}
			d, err := kube.AppsV1().Deployments(ns).Get(ctx, deployment, metav1.GetOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return false, nil
			}
			deploymentThere := err == nil
			w.mu.Lock()
			defer w.mu.Unlock()
			switch {
			case bucketThere && deploymentThere:
				w.seen.both++
			case deploymentThere:
				w.seen.violations = append(w.seen.violations, fmt.Sprintf("bucket %s gone, Deployment %s there (deletionTimestamp %v)", bucket, deployment, d.DeletionTimestamp))
			}
			return false, nil
		})
	}()
	return w
}

func (w *orderWatch) stop() orderSeen {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen
}
