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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestDiffPlansExternalResources: engine diff asks the gcs plugin what it
// would do to a parent's bucket (fake-gcs-server behind it), writing
// nothing: unchanged for the same template, the labels an edit adds, a
// storage class changed in place, a refusal for a location change, and a
// Delete (exit status 3) when the template drops the bucket.
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

	out, code = engineDiff(t, "--templates", edit(`storageClass: parent.spec.storageClass`, `storageClass: "NEARLINE"`))
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, head+": Update\n#   storageClass: \"STANDARD\" -> \"NEARLINE\"\n")

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

// TestDiffPlansADatabase: engine diff asks the postgresql plugin what a
// template edit would do to a WebApp's database on a real PostgreSQL
// server (Debian's postgresql-15): unchanged for the same template, and a
// refusal naming the field for an edit that renames the database (the
// engine never renames a database; Apply refuses the same way). The
// server is read, never written: its databases, roles and the database's
// owner mark are the same after every diff.
func TestDiffPlansADatabase(t *testing.T) {
	_, conn := startPostgres(t)
	dir := templatesDir(t, "examples/templates/webapp.cue")
	installCRDs(t, dir)
	startEngine(t, dir, "--resource-resync", "2s")
	ns := namespace(t)
	kubectlApply(t, ns, "apiVersion: apps.cuengine.dev/v1\nkind: WebApp\nmetadata: {name: planned}\nspec: {database: planned}\n")
	var database string
	eventually(t, "the WebApp's database created and recorded", 2*time.Minute, func(ctx context.Context) (bool, error) {
		u, err := dyn.Resource(webAppKind).Namespace(ns).Get(ctx, "planned", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		database, _, err = unstructured.NestedString(u.Object, "status", "database")
		return database != "", err
	})
	state := func() string {
		t.Helper()
		var s string
		require.NoError(t, conn.QueryRow(context.Background(),
			`SELECT string_agg(datname || ':' || coalesce(shobj_description(oid, 'pg_database'), ''), ',' ORDER BY datname)
			   || '|' || (SELECT string_agg(rolname, ',' ORDER BY rolname) FROM pg_roles WHERE rolname LIKE 'planned%')
			 FROM pg_database WHERE datname LIKE 'planned%'`).Scan(&s))
		return s
	}
	before := state()
	require.Contains(t, before, database+":", "the database is on the server")
	head := fmt.Sprintf("# WebApp %s/planned: resource db (postgresql %s)", ns, database)

	out, code := engineDiff(t, "--templates", dir)
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "1 resources unchanged")

	src, err := os.ReadFile(filepath.Join(dir, "webapp.cue"))
	require.NoError(t, err)
	next := t.TempDir()
	edited := strings.Replace(string(src), "spec: database: parent.spec.database", `spec: database: parent.spec.database + "_v2"`, 1)
	require.NotEqual(t, string(src), edited)
	require.NoError(t, os.WriteFile(filepath.Join(next, "webapp.cue"), []byte(edited), 0o644))
	out, code = engineDiff(t, "--templates", next)
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, head+`: Refuse: ImmutableField: spec.database changed from "planned" to "planned_v2"`)

	assert.Equal(t, before, state(), "the diffs wrote nothing on the server")
}
