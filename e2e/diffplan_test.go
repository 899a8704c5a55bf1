package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDiffPlansExternalResources: engine diff asks the gcs plugin what it
// would do to a parent's bucket (fake-gcs-server behind it), writing
// nothing: unchanged for the same template, the labels an edit adds, a
// refusal for a location change, and a Delete (exit status 3) when the
// template drops the bucket.
func TestDiffPlansExternalResources(t *testing.T) {
	emu := startEmulator(t)
	dir := templatesDir(t, "examples/templates/gcs.cue")
	installCRDs(t, dir)
	t.Setenv("STORAGE_EMULATOR_HOST", emu.Host())
	startEngine(t, dir, "--resource-resync", "2s")
	ns := namespace(t)
	kubectlApply(t, ns, "apiVersion: storage.matsumo.dev/v1\nkind: Gcs\nmetadata: {name: planned}\nspec: {projectID: my-project, bucketName: planned}\n")
	eventually(t, "planned Ready", 90*time.Second, func(ctx context.Context) (bool, error) {
		status, _, err := condition(ctx, gcsKind, ns, "planned", "Ready")
		return status == "True", err
	})
	u, err := gcsParent(context.Background(), ns, "planned")
	require.NoError(t, err)
	buckets := bucketsOf(t, emu, string(u.GetUID()))
	require.Len(t, buckets, 1)
	bucket := buckets[0]
	head := fmt.Sprintf("# Gcs %s/planned: resource bucket (gcs %s)", ns, bucket)

	out, code := engineDiff(t, "--templates", dir)
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "Gcs.storage.matsumo.dev/v1: 1 parents: 1 resources unchanged")

	src, err := os.ReadFile(filepath.Join(dir, "gcs.cue"))
	require.NoError(t, err)
	edit := func(from, to string) string {
		t.Helper()
		next := t.TempDir()
		edited := strings.Replace(string(src), from, to, 1)
		require.NotEqual(t, string(src), edited)
		require.NoError(t, os.WriteFile(filepath.Join(next, "gcs.cue"), []byte(edited), 0o644))
		return next
	}

	out, code = engineDiff(t, "--templates", edit(`labels: "k8s-namespace": parent.metadata.namespace`, `labels: {"k8s-namespace": parent.metadata.namespace, team: "storage"}`))
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, head+": Update\n#   labels.team: \"storage\"\n")
	assert.Contains(t, out, "1 resources updated")

	out, code = engineDiff(t, "--templates", edit(`location:     parent.spec.location`, `location:     "EU"`))
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, head+`: Refuse: ImmutableField: spec.location changed from "US" to "EU"`)

	i := strings.Index(string(src), "resources: bucket: {")
	j := strings.Index(string(src), "\nstatus: {")
	require.True(t, i > 0 && j > i)
	out, code = engineDiff(t, "--templates", edit(string(src)[i:j], ""))
	assert.Equal(t, 3, code, out)
	assert.Contains(t, out, head+": Delete: no longer in the template (deletionPolicy Delete)")
	assert.Contains(t, out, "1 resources deleted")

	assert.Equal(t, []string{bucket}, bucketsOf(t, emu, string(u.GetUID())), "the diffs wrote nothing")

	// Leave no bucket behind for the tests that count them.
	require.NoError(t, dyn.Resource(gcsKind).Namespace(ns).Delete(context.Background(), "planned", metav1.DeleteOptions{}))
	eventually(t, "the bucket deleted with its parent", 90*time.Second, func(ctx context.Context) (bool, error) {
		return len(bucketsOf(t, emu, string(u.GetUID()))) == 0, nil
	})
}
