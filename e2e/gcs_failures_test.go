package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// gcsReady waits for a Gcs to be Ready and returns its UID and bucket.
func gcsReady(t *testing.T, ns, name string) (uid, physical string) {
	t.Helper()
	eventually(t, name+" Ready", 60*time.Second, func(ctx context.Context) (bool, error) {
		u, err := gcsParent(ctx, ns, name)
		if err != nil {
			return false, err
		}
		uid = string(u.GetUID())
		physical, _, _ = unstructured.NestedString(u.Object, "status", "bucketFullName")
		status, _, err := condition(ctx, gcsKind, ns, name, "Ready")
		return status == "True" && physical != "", err
	})
	return uid, physical
}

// syncedReason waits for Synced=False with a reason and returns the message.
func syncedReason(t *testing.T, ns, name, reason string) string {
	t.Helper()
	var msg string
	eventually(t, name+" Synced=False "+reason, 60*time.Second, func(ctx context.Context) (bool, error) {
		status, m, err := condition(ctx, gcsKind, ns, name, "Synced")
		msg = m
		return status == "False" && strings.HasPrefix(m, reason+":"), err
	})
	return msg
}

// TestGcsFailureModes: what a user sees when the cloud says no, and how to
// get out of it without leaking or looping.
func TestGcsFailureModes(t *testing.T) {
	emu := startEmulator(t)
	front := newGCSFront(t, emu.URL())
	var forbid atomic.Bool
	front.setOnRequest(func(w http.ResponseWriter, r *http.Request) bool {
		if forbid.Load() {
			http.Error(w, `{"error":{"code":403,"message":"Permission denied (test)"}}`, http.StatusForbidden)
			return true
		}
		return false
	})
	dir := templatesDir(t, "examples/templates/gcs.cue")
	installCRDs(t, dir)
	t.Setenv("STORAGE_EMULATOR_HOST", front.host())
	startEngine(t, dir, "--resource-resync", "2s")
	ns := namespace(t)
	apply := func(name, extra string) {
		kubectlApply(t, ns, fmt.Sprintf("apiVersion: storage.matsumo.dev/v1\nkind: Gcs\nmetadata: {name: %s}\nspec: {projectID: p, bucketName: %s%s}\n", name, name, extra))
	}
	client, err := storage.NewClient(context.Background(), option.WithEndpoint(emu.URL()+"/storage/v1/"), option.WithoutAuthentication())
	require.NoError(t, err)
	defer client.Close()

	t.Run("a non-empty bucket blocks deletion until forceDestroy or Orphan", func(t *testing.T) {
		apply("full", "")
		uid, physical := gcsReady(t, ns, "full")
		w := client.Bucket(physical).Object("data.txt").NewWriter(context.Background())
		_, err := w.Write([]byte("keep me"))
		require.NoError(t, err)
		require.NoError(t, w.Close())

		kubectl(t, "-n", ns, "delete", "gcs", "full", "--wait=false")
		msg := syncedReason(t, ns, "full", "BucketNotEmpty")
		assert.Contains(t, msg, "engine.cuengine.dev/deletion-policy=Orphan", "the message says how to get out")
		_, err = gcsParent(context.Background(), ns, "full")
		require.NoError(t, err, "the finalizer keeps the object")
		assert.Equal(t, []string{physical}, bucketsOf(t, emu, uid))

		kubectl(t, "-n", ns, "annotate", "gcs", "full", "engine.cuengine.dev/deletion-policy=Orphan")
		eventually(t, "the object gone, the bucket kept", 30*time.Second, func(ctx context.Context) (bool, error) {
			_, err := gcsParent(ctx, ns, "full")
			return apierrors.IsNotFound(err), nil
		})
		assert.Equal(t, []string{physical}, bucketsOf(t, emu, uid), "orphaned, not deleted")
	})

	t.Run("forceDestroy deletes a non-empty bucket with its objects", func(t *testing.T) {
		apply("scratch", ", forceDestroy: true")
		uid, physical := gcsReady(t, ns, "scratch")
		w := client.Bucket(physical).Object("tmp.txt").NewWriter(context.Background())
		_, err := w.Write([]byte("throw away"))
		require.NoError(t, err)
		require.NoError(t, w.Close())
		kubectl(t, "-n", ns, "delete", "gcs", "scratch", "--timeout=60s")
		assert.Empty(t, bucketsOf(t, emu, uid))
	})

	t.Run("an immutable field change is refused, not a second bucket", func(t *testing.T) {
		apply("moving", "")
		uid, physical := gcsReady(t, ns, "moving")
		kubectl(t, "-n", ns, "patch", "gcs", "moving", "--type=merge", "-p", `{"spec":{"location":"EU"}}`)
		msg := syncedReason(t, ns, "moving", "ImmutableField")
		assert.Contains(t, msg, "location")
		assert.Equal(t, []string{physical}, bucketsOf(t, emu, uid))
		kubectl(t, "-n", ns, "patch", "gcs", "moving", "--type=merge", "-p", `{"spec":{"location":"US"}}`)
		gcsReady(t, ns, "moving")
		kubectl(t, "-n", ns, "delete", "gcs", "moving", "--timeout=60s")
		assert.Empty(t, bucketsOf(t, emu, uid))
	})

	t.Run("missing credentials are reported and keep the finalizer", func(t *testing.T) {
		apply("locked", "")
		uid, _ := gcsReady(t, ns, "locked")
		forbid.Store(true)
		defer forbid.Store(false)
		kubectl(t, "-n", ns, "delete", "gcs", "locked", "--wait=false")
		msg := syncedReason(t, ns, "locked", "CredentialsError")
		assert.Contains(t, msg, "engine.cuengine.dev/deletion-policy=Orphan")
		_, err := gcsParent(context.Background(), ns, "locked")
		require.NoError(t, err, "the finalizer is kept")
		forbid.Store(false)
		eventually(t, "deleted once the credentials work", 60*time.Second, func(ctx context.Context) (bool, error) {
			_, err := gcsParent(ctx, ns, "locked")
			return apierrors.IsNotFound(err), nil
		})
		assert.Empty(t, bucketsOf(t, emu, uid))
	})
}
