package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cuengine/engine/internal/pgserver"
)

var webAppKind = schema.GroupVersionResource{Group: "apps.cuengine.dev", Version: "v1", Resource: "webapps"}

// startPostgres starts a throwaway server for one test and points libpq's
// environment (which bin/engine inherits) at it.
func startPostgres(t *testing.T) (*pgserver.Server, *pgx.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := pgserver.Start(ctx, pgserver.Options{Log: t.Logf})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Stop()) })
	for k, v := range s.Env() {
		t.Setenv(k, v)
	}
	conn, err := pgx.Connect(ctx, s.DSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return s, conn
}

func count(t *testing.T, conn *pgx.Conn, sql string) int {
	t.Helper()
	var n int
	require.NoError(t, conn.QueryRow(context.Background(), sql).Scan(&n))
	return n
}

// TestPostgresCrashKeepsTenDatabases: ten WebApps created at once, the
// engine killed with SIGKILL while it creates their databases, then
// restarted: every WebApp ends with its database and its Secret, and there
// are exactly ten databases and ten roles, none leaked or doubled.
// Deleting the WebApps drops them all.
func TestPostgresCrashKeepsTenDatabases(t *testing.T) {
	_, conn := startPostgres(t)
	dir := templatesDir(t, "examples/templates/webapp.cue")
	installCRDs(t, dir)
	ns := namespace(t)
	const n = 10
	databases := `SELECT count(*) FROM pg_database WHERE datname LIKE 'crash\_%'`
	roles := `SELECT count(*) FROM pg_roles WHERE rolname LIKE 'crash\_%'`

	eng := startEngine(t, dir, "--resource-resync", "2s")
	var manifest strings.Builder
	for i := range n {
		fmt.Fprintf(&manifest, "---\napiVersion: apps.cuengine.dev/v1\nkind: WebApp\nmetadata: {name: app-%d}\nspec: {database: crash}\n", i)
	}
	kubectlApply(t, ns, manifest.String())
	eventually(t, "a first database", time.Minute, func(context.Context) (bool, error) {
		return count(t, conn, databases) > 0, nil
	})
	eng.kill()
	atKill := count(t, conn, databases)
	t.Logf("killed the engine with %d of %d databases created", atKill, n)

	startEngine(t, dir, "--resource-resync", "2s")
	eventually(t, "every WebApp Ready with its database", 3*time.Minute, func(ctx context.Context) (bool, error) {
		list, err := dyn.Resource(webAppKind).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		ready := 0
		for _, u := range list.Items {
			db, _, _ := unstructured.NestedString(u.Object, "status", "database")
			if status, _, _ := condition(ctx, webAppKind, ns, u.GetName(), "Ready"); strings.HasPrefix(db, "crash_") && status == "True" {
				ready++
			}
		}
		return ready == n, nil
	})
	assert.Equal(t, n, count(t, conn, databases), "exactly one database per WebApp")
	assert.Equal(t, n, count(t, conn, roles), "exactly one role per WebApp")
	for i := range n {
		out := kubectl(t, "-n", ns, "get", "secret", fmt.Sprintf("app-%d-db", i), "-o", "jsonpath={.data.password}")
		assert.NotEmpty(t, out, "app-%d's Secret holds a password", i)
	}

	kubectl(t, "-n", ns, "delete", "webapps", "--all", "--wait=true", "--timeout=120s")
	assert.Zero(t, count(t, conn, databases), "deleting the WebApps drops their databases")
	assert.Zero(t, count(t, conn, roles), "and their roles")
}
