package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cuengine/engine/internal/gcsemulator"
)

var gcsKind = schema.GroupVersionResource{Group: "storage.matsumo.dev", Version: "v1", Resource: "gcs"}

// gcsFront is a reverse proxy in front of the emulator that lets a test
// act at the moment the engine sends a bucket create.
type gcsFront struct {
	srv   *httptest.Server
	proxy *httputil.ReverseProxy

	mu        sync.Mutex
	onCreate  func(w http.ResponseWriter, forward func()) // nil: forward normally
	onRequest func(w http.ResponseWriter, r *http.Request) bool
}

func newGCSFront(t *testing.T, target string) *gcsFront {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	f := &gcsFront{proxy: httputil.NewSingleHostReverseProxy(u)}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		hook, answer := f.onCreate, f.onRequest
		f.mu.Unlock()
		if answer != nil && answer(w, r) {
			return // answered by the test
		}
		if hook != nil && r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/storage/v1/b") {
			hook(w, func() { f.proxy.ServeHTTP(w, r) })
			return
		}
		f.proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *gcsFront) setOnCreate(hook func(w http.ResponseWriter, forward func())) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onCreate = hook
}

// setOnRequest lets a test answer any request itself (return true).
func (f *gcsFront) setOnRequest(hook func(w http.ResponseWriter, r *http.Request) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onRequest = hook
}

func (f *gcsFront) host() string { return strings.TrimPrefix(f.srv.URL, "http://") }

// startEmulator runs the GCS emulator for one test.
func startEmulator(t *testing.T) *gcsemulator.Emulator {
	t.Helper()
	emu, err := gcsemulator.Start(gcsemulator.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = emu.Stop() })
	return emu
}

// bucketsOf lists the emulator's buckets owned by a parent UID.
func bucketsOf(t *testing.T, emu *gcsemulator.Emulator, uid string) []string {
	t.Helper()
	all, err := emu.Buckets(context.Background())
	require.NoError(t, err)
	var out []string
	for _, b := range all {
		if b.Labels["engine-owner-uid"] == uid {
			out = append(out, b.Name)
		}
	}
	return out
}

func gcsParent(ctx context.Context, ns, name string) (*unstructured.Unstructured, error) {
	return dyn.Resource(gcsKind).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
}

// TestGcsEndToEnd: the Gcs story (a bucket owned by a custom resource), against the emulator.
func TestGcsEndToEnd(t *testing.T) {
	emu := startEmulator(t)
	dir := templatesDir(t, "examples/templates/gcs.cue")
	installCRDs(t, dir)
	t.Setenv("STORAGE_EMULATOR_HOST", emu.Host())
	startEngine(t, dir, "--resource-resync", "2s")
	ns := namespace(t)
	kubectl(t, "-n", ns, "apply", "-f", repo+"/examples/crs/gcs.yaml")

	var uid, physical string
	eventually(t, "status.bucketFullName and Ready", 30*time.Second, func(ctx context.Context) (bool, error) {
		u, err := gcsParent(ctx, ns, "example")
		if err != nil {
			return false, err
		}
		uid = string(u.GetUID())
		physical, _, _ = unstructured.NestedString(u.Object, "status", "bucketFullName")
		status, _, err := condition(ctx, gcsKind, ns, "example", "Ready")
		return strings.HasPrefix(physical, "example-") && status == "True", err
	})
	assert.Equal(t, []string{physical}, bucketsOf(t, emu, uid))
	assert.Regexp(t, `^example-[0-9a-f]{8}$`, physical)
	assert.Contains(t, kubectl(t, "-n", ns, "get", "gcs", "example"), physical)

	t.Run("a bucket deleted behind its back is recreated under the same name", func(t *testing.T) {
		client, err := storage.NewClient(context.Background(), option.WithEndpoint(emu.URL()+"/storage/v1/"), option.WithoutAuthentication())
		require.NoError(t, err)
		defer client.Close()
		require.NoError(t, client.Bucket(physical).Delete(context.Background()))
		require.Empty(t, bucketsOf(t, emu, uid))
		eventually(t, "the bucket back", 30*time.Second, func(ctx context.Context) (bool, error) {
			return fmt.Sprint(bucketsOf(t, emu, uid)) == fmt.Sprint([]string{physical}), nil
		})
	})

	t.Run("deleting the Gcs deletes the bucket, then the object", func(t *testing.T) {
		kubectl(t, "-n", ns, "delete", "gcs", "example", "--wait=true", "--timeout=60s")
		assert.Empty(t, bucketsOf(t, emu, uid))
		_, err := gcsParent(context.Background(), ns, "example")
		assert.True(t, apierrors.IsNotFound(err))
	})
}

// TestGcsCrashNeverLeaks kills the engine with SIGKILL at each point around
// a bucket create and restarts it: every time there is exactly one bucket,
// and deleting the object leaves none.
func TestGcsCrashNeverLeaks(t *testing.T) {
	emu := startEmulator(t)
	front := newGCSFront(t, emu.URL())
	dir := templatesDir(t, "examples/templates/gcs.cue")
	installCRDs(t, dir)
	t.Setenv("STORAGE_EMULATOR_HOST", front.host())
	ns := namespace(t)

	killPoints := []struct {
		name string
		hook func(kill func()) func(w http.ResponseWriter, forward func())
	}{
		{"before the create reaches the server", func(kill func()) func(http.ResponseWriter, func()) {
			return func(_ http.ResponseWriter, _ func()) { kill() }
		}},
		{"after the server created it, before the response", func(kill func()) func(http.ResponseWriter, func()) {
			return func(_ http.ResponseWriter, forward func()) {
				forward() // into the proxy's buffer: the engine never reads it
				kill()
			}
		}},
		{"after the response reached the engine", func(kill func()) func(http.ResponseWriter, func()) {
			return func(w http.ResponseWriter, forward func()) {
				forward()
				w.(http.Flusher).Flush()
				kill()
			}
		}},
	}
	for i, kp := range killPoints {
		t.Run(kp.name, func(t *testing.T) {
			name := fmt.Sprintf("crash-%d", i)
			killed := make(chan struct{})
			var once sync.Once
			var eng *engineProc
			front.setOnCreate(kp.hook(func() {
				once.Do(func() {
					eng.kill()
					close(killed)
				})
			}))
			eng = startEngine(t, dir)
			kubectlApply(t, ns, fmt.Sprintf(`
apiVersion: storage.matsumo.dev/v1
kind: Gcs
metadata: {name: %s}
spec: {projectID: my-project, bucketName: crash}
`, name))
			select {
			case <-killed:
			case <-time.After(60 * time.Second):
				t.Fatal("the engine never sent a create")
			}
			front.setOnCreate(nil)
			startEngine(t, dir)

			u, err := gcsParent(context.Background(), ns, name)
			require.NoError(t, err)
			uid := string(u.GetUID())
			eventually(t, "Ready after the restart", 60*time.Second, func(ctx context.Context) (bool, error) {
				status, _, err := condition(ctx, gcsKind, ns, name, "Ready")
				return status == "True", err
			})
			u, err = gcsParent(context.Background(), ns, name)
			require.NoError(t, err)
			physical, _, _ := unstructured.NestedString(u.Object, "status", "bucketFullName")
			assert.Equal(t, []string{physical}, bucketsOf(t, emu, uid), "exactly one bucket, the recorded one")

			kubectl(t, "-n", ns, "delete", "gcs", name, "--wait=true", "--timeout=60s")
			assert.Empty(t, bucketsOf(t, emu, uid), "no bucket leaked")
		})
	}
	all, err := emu.Buckets(context.Background())
	require.NoError(t, err)
	assert.Empty(t, all, "no bucket left at all")
}

// TestStorefrontGetsThePhysicalName: one object owns a bucket and a
// Deployment; the Deployment appears once the bucket exists, with the
// physical bucket name in its environment.
func TestStorefrontGetsThePhysicalName(t *testing.T) {
	emu := startEmulator(t)
	dir := t.TempDir()
	require.NoError(t, copyDir(repo+"/examples/templates/storefront", dir+"/storefront"))
	installCRDs(t, dir)
	t.Setenv("STORAGE_EMULATOR_HOST", emu.Host())
	startEngine(t, dir)
	ns := namespace(t)
	kubectl(t, "-n", ns, "apply", "-f", repo+"/examples/crs/storefront.yaml")
	storefronts := schema.GroupVersionResource{Group: "apps.cuengine.dev", Version: "v1", Resource: "storefronts"}
	var bucket string
	eventually(t, "Storefront Ready", 60*time.Second, func(ctx context.Context) (bool, error) {
		u, err := dyn.Resource(storefronts).Namespace(ns).Get(ctx, "shop", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		bucket, _, _ = unstructured.NestedString(u.Object, "status", "bucket")
		status, _, err := condition(ctx, storefronts, ns, "shop", "Ready")
		return bucket != "" && status == "True", err
	})
	d, err := kube.AppsV1().Deployments(ns).Get(context.Background(), "shop", metav1.GetOptions{})
	require.NoError(t, err)
	env := map[string]string{}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	assert.Equal(t, bucket, env["BUCKET_NAME"])
	assert.Equal(t, "gs://"+bucket, env["BUCKET_URL"])
	all, err := emu.Buckets(context.Background())
	require.NoError(t, err)
	require.Len(t, all, 1)
	assert.Equal(t, bucket, all[0].Name)
}

func copyDir(from, to string) error {
	entries, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	for _, e := range entries {
		b, err := os.ReadFile(from + "/" + e.Name())
		if err != nil {
			return err
		}
		if err := os.WriteFile(to+"/"+e.Name(), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// TestRemovedTemplateStillFinishesDeletions: removing a template must not
// leave its objects stuck on the engine's finalizer, nor leak their buckets.
func TestRemovedTemplateStillFinishesDeletions(t *testing.T) {
	emu := startEmulator(t)
	dir := templatesDir(t, "examples/templates/gcs.cue", "examples/templates/mykind.cue")
	installCRDs(t, dir)
	t.Setenv("STORAGE_EMULATOR_HOST", emu.Host())
	eng := startEngine(t, dir)
	ns := namespace(t)
	kubectl(t, "-n", ns, "apply", "-f", repo+"/examples/crs/gcs.yaml")
	uid, _ := gcsReady(t, ns, "example")

	require.NoError(t, os.Remove(dir+"/gcs.cue"))
	eventually(t, "the engine to retire the Gcs kind", 30*time.Second, func(ctx context.Context) (bool, error) {
		return strings.Contains(eng.log.String(), "deletions of its objects are still finished"), nil
	})
	kubectl(t, "-n", ns, "delete", "gcs", "example", "--timeout=60s")
	assert.Empty(t, bucketsOf(t, emu, uid))
}
