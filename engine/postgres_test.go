package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/internal/pgserver"
	"github.com/cuengine/engine/providers"
	"github.com/cuengine/engine/providers/postgresql"
	"github.com/cuengine/engine/templates"
)

// pg is the package's PostgreSQL, started by the first test that needs it.
var pg pgserver.Shared

var (
	webAppGVK = schema.GroupVersionKind{Group: "apps.cuengine.dev", Version: "v1", Kind: "WebApp"}
	rawDBGVK  = schema.GroupVersionKind{Group: "test.cuengine.dev", Version: "v1", Kind: "RawDB"}
)

// rawDB is a template without the example's schema on the name, so a
// hostile name reaches the provider.
const rawDB = `package rawdb

parent: {apiVersion: "test.cuengine.dev/v1", kind: "RawDB", spec: database: string}
resources: db: {
	provider: "postgresql"
	spec: database: parent.spec.database
	connectionSecret: name: parent.metadata.name + "-db"
}
`

// syncBuffer is a log sink the engine's goroutines write to concurrently.
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

// startPostgresEngine runs an engine with the postgresql provider on the
// package's server, the WebApp example and rawDB, and returns its log.
func startPostgresEngine(t *testing.T) (*syncBuffer, *pgserver.Server) {
	t.Helper()
	controlPlane(t)
	s := pg.Get(t)
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	b, err := os.ReadFile("../examples/templates/webapp.cue")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "webapp.cue"), b, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rawdb.cue"), []byte(rawDB), 0o644))
	set, err := templates.Load(dir)
	require.NoError(t, err)
	for _, tm := range set.Templates() {
		if err := k8s.Create(ctx, tm.CRD()); !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
	}
	p, err := postgresql.New(ctx, postgresql.Options{ConnString: s.DSN()})
	require.NoError(t, err)
	reg := providers.NewRegistry()
	postgresql.Register(reg, p)

	logs := &syncBuffer{}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", MapperProvider: engine.NewRESTMapper,
		Logger: zap.New(zap.WriteTo(logs), zap.Level(zapcore.Level(-5))), // everything, V(1) and beyond
	})
	require.NoError(t, err)
	eng, err := engine.New(mgr, engine.Options{Providers: reg, MaxConcurrentReconciles: 4, ResourceResync: 2 * time.Second})
	require.NoError(t, err)
	eng.SetTemplates(set)
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done; p.Close() })
	return logs, s
}

func admin(t *testing.T, s *pgserver.Server) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), s.DSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func countRows(t *testing.T, conn *pgx.Conn, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, conn.QueryRow(t.Context(), sql, args...).Scan(&n))
	return n
}

// connectionSecret waits for the Secret to hold a password other than
// not, and returns its data.
func connectionSecret(t *testing.T, ns, name, not string) map[string][]byte {
	t.Helper()
	var data map[string][]byte
	eventuallyWithin(t, "Secret "+name+" with a password", time.Minute, func(ctx context.Context) (bool, error) {
		sec := &corev1.Secret{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sec); err != nil {
			return false, err
		}
		data = sec.Data
		return len(sec.Data["password"]) > 0 && string(sec.Data["password"]) != not, nil
	})
	return data
}

// loginAs connects with the Secret's uri and returns the user and the owner
// of the database it lands in.
func loginAs(ctx context.Context, data map[string][]byte) (user, owner string, err error) {
	conn, err := pgx.Connect(ctx, string(data["uri"]))
	if err != nil {
		return "", "", err
	}
	defer conn.Close(context.Background())
	err = conn.QueryRow(ctx, `SELECT current_user, pg_get_userbyid(datdba) FROM pg_database WHERE datname = current_database()`).Scan(&user, &owner)
	return user, owner, err
}

// noPasswordAnywhere fails when a password shows in a parent (status,
// annotations, anything), an event of the namespace or the engine's log.
func noPasswordAnywhere(t *testing.T, ns string, logs *syncBuffer, parents []*unstructured.Unstructured, passwords ...string) {
	t.Helper()
	var places []string
	for _, p := range parents {
		cur := &unstructured.Unstructured{}
		cur.SetGroupVersionKind(p.GroupVersionKind())
		require.NoError(t, k8s.Get(t.Context(), client.ObjectKeyFromObject(p), cur))
		b, err := json.Marshal(cur.Object)
		require.NoError(t, err)
		places = append(places, "parent "+p.GetName()+": "+string(b))
	}
	var core corev1.EventList
	require.NoError(t, k8s.List(t.Context(), &core, client.InNamespace(ns)))
	var ev eventsv1.EventList
	require.NoError(t, k8s.List(t.Context(), &ev, client.InNamespace(ns)))
	b, err := json.Marshal(core)
	require.NoError(t, err)
	places = append(places, "events: "+string(b))
	b, err = json.Marshal(ev)
	require.NoError(t, err)
	places = append(places, "events.k8s.io: "+string(b))
	places = append(places, "log: "+logs.String())
	for _, pw := range passwords {
		require.NotEmpty(t, pw)
		for _, p := range places {
			assert.NotContains(t, p, pw, "a password in %s", p[:strings.IndexByte(p, ':')])
		}
	}
}

// TestPostgresDatabase: a WebApp on the real apiserver and a real
// PostgreSQL gets its database and role; the Secret's credentials log in
// and own the database; no password shows in status, events or logs; a
// lost Secret gets new credentials; a database dropped out of band comes
// back; deleting the parent drops both, and Orphan keeps them.
func TestPostgresDatabase(t *testing.T) {
	logs, s := startPostgresEngine(t)
	conn := admin(t, s)
	ctx := t.Context()
	ns := namespace(t)

	app := parent(webAppGVK, ns, "shop", map[string]any{"database": "shop"})
	require.NoError(t, k8s.Create(ctx, app))
	defer func() {
		if t.Failed() {
			cur := &unstructured.Unstructured{}
			cur.SetGroupVersionKind(webAppGVK)
			_ = k8s.Get(context.Background(), client.ObjectKeyFromObject(app), cur)
			t.Logf("parent: %v", cur.Object)
			l := logs.String()
			t.Logf("log (tail): %s", l[max(0, len(l)-5000):])
		}
	}()
	first := connectionSecret(t, ns, "shop-db", "")
	user, owner, err := loginAs(ctx, first)
	require.NoError(t, err)
	assert.Equal(t, string(first["username"]), user)
	assert.Equal(t, user, owner, "the Secret's role owns the database")
	for _, k := range []string{"database", "host", "port"} {
		assert.NotEmpty(t, first[k], k)
	}
	assert.True(t, strings.HasPrefix(string(first["database"]), "shop_"))
	eventually(t, "the Deployment, mounting the Secret", func(ctx context.Context) (bool, error) {
		d, err := getDeployment(ctx, ns, "shop")
		if err != nil {
			return false, err
		}
		vols := d.Spec.Template.Spec.Volumes
		return len(vols) == 1 && vols[0].Secret != nil && vols[0].Secret.SecretName == "shop-db", nil
	})
	eventually(t, "status.database", func(ctx context.Context) (bool, error) {
		cur := &unstructured.Unstructured{}
		cur.SetGroupVersionKind(webAppGVK)
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(app), cur); err != nil {
			return false, err
		}
		db, _, _ := unstructured.NestedString(cur.Object, "status", "database")
		return db == string(first["database"]), nil
	})

	// The Secret deleted out of band: new credentials, the old ones dead.
	require.NoError(t, k8s.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop-db"}}))
	second := connectionSecret(t, ns, "shop-db", string(first["password"]))
	_, _, err = loginAs(ctx, second)
	require.NoError(t, err)
	_, _, err = loginAs(ctx, first)
	require.Error(t, err, "the lost password no longer logs in")

	// The database dropped out of band comes back on the next resync.
	_, err = conn.Exec(ctx, "DROP DATABASE "+pgx.Identifier{string(second["database"])}.Sanitize()+" WITH (FORCE)")
	require.NoError(t, err)
	eventuallyWithin(t, "the database recreated", time.Minute, func(ctx context.Context) (bool, error) {
		_, owner, err := loginAs(ctx, second)
		return err == nil && owner == string(second["username"]), err
	})

	// A name carrying SQL drops nothing and the parent says why.
	databases := countRows(t, conn, "SELECT count(*) FROM pg_database")
	evil := parent(rawDBGVK, ns, "evil", map[string]any{"database": `x"; DROP DATABASE postgres; --`})
	require.NoError(t, k8s.Create(ctx, evil))
	eventually(t, "the hostile parent refused", func(ctx context.Context) (bool, error) {
		c, err := condition(ctx, evil, contract.ConditionSynced)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == providers.ReasonInvalidName &&
			strings.Contains(c.Message, `spec.database "x\"; DROP DATABASE postgres; --": character '"' at position 1 is not allowed`), err
	})
	assert.Equal(t, databases, countRows(t, conn, "SELECT count(*) FROM pg_database"))
	assert.Equal(t, 1, countRows(t, conn, "SELECT count(*) FROM pg_database WHERE datname = 'postgres'"))

	// Orphan keeps both.
	kept := parent(webAppGVK, ns, "kept", map[string]any{"database": "kept", "deletionPolicy": "Orphan"})
	require.NoError(t, k8s.Create(ctx, kept))
	keptData := connectionSecret(t, ns, "kept-db", "")

	noPasswordAnywhere(t, ns, logs, []*unstructured.Unstructured{app, kept, evil},
		string(first["password"]), string(second["password"]), string(keptData["password"]))

	for _, obj := range []*unstructured.Unstructured{app, kept, evil} {
		require.NoError(t, k8s.Delete(ctx, obj))
	}
	eventuallyWithin(t, "the parents deleted", time.Minute, func(ctx context.Context) (bool, error) {
		if err := collectForeground(ctx, ns); err != nil {
			return false, err
		}
		for _, obj := range []*unstructured.Unstructured{app, kept, evil} {
			cur := &unstructured.Unstructured{}
			cur.SetGroupVersionKind(obj.GroupVersionKind())
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), cur); !apierrors.IsNotFound(err) {
				return false, fmt.Errorf("%s still there (%v)", obj.GetName(), err)
			}
		}
		return true, nil
	})
	assert.Zero(t, countRows(t, conn, "SELECT count(*) FROM pg_database WHERE datname = $1", string(second["database"])), "the database dropped")
	assert.Zero(t, countRows(t, conn, "SELECT count(*) FROM pg_roles WHERE rolname = $1", string(second["username"])), "the role dropped")
	assert.Equal(t, 1, countRows(t, conn, "SELECT count(*) FROM pg_database WHERE datname = $1", string(keptData["database"])), "Orphan keeps the database")
	assert.Equal(t, 1, countRows(t, conn, "SELECT count(*) FROM pg_roles WHERE rolname = $1", string(keptData["username"])), "and the role")
	_, _, err = loginAs(ctx, keptData)
	assert.NoError(t, err, "an orphaned database still serves its credentials")
}

// watchConditions records, from now on, every value the parent's
// condition condType takes, as "Status Reason", in the order the
// apiserver stored them.
func watchConditions(t *testing.T, obj *unstructured.Unstructured, condType string) func() []string {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	gvr := schema.GroupVersionResource{Group: obj.GroupVersionKind().Group, Version: obj.GroupVersionKind().Version, Resource: strings.ToLower(obj.GetKind()) + "s"}
	w, err := dyn.Resource(gvr).Namespace(obj.GetNamespace()).Watch(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=" + obj.GetName()})
	require.NoError(t, err)
	var mu sync.Mutex
	var seen []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			st, _, _ := unstructured.NestedMap(u.Object, "status")
			if c := meta.FindStatusCondition(contract.ConditionsOf(st), condType); c != nil {
				mu.Lock()
				if v := string(c.Status) + " " + c.Reason; len(seen) == 0 || seen[len(seen)-1] != v {
					seen = append(seen, v)
				}
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { w.Stop(); <-done })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

// editSecret changes the connection Secret as kubectl edit would.
func editSecret(t *testing.T, ns, name string, edit func(data map[string][]byte)) {
	t.Helper()
	sec := &corev1.Secret{}
	require.NoError(t, k8s.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, sec))
	edit(sec.Data)
	require.NoError(t, k8s.Update(t.Context(), sec))
}

// TestPostgresConnectionSecretDrift: a connection Secret whose password is
// edited by hand, then removed, is put right with new credentials that log
// in on the real server; meanwhile the parent is not Ready (Synced and
// Ready False, ConnectionSecretDrifted); a key someone added stays; no
// password shows in status, events or logs.
func TestPostgresConnectionSecretDrift(t *testing.T) {
	logs, _ := startPostgresEngine(t)
	ctx := t.Context()
	ns := namespace(t)
	app := parent(rawDBGVK, ns, "drift", map[string]any{"database": "drift"})
	require.NoError(t, k8s.Create(ctx, app))
	first := connectionSecret(t, ns, "drift-db", "")
	eventually(t, "drift Ready", func(ctx context.Context) (bool, error) {
		c, err := condition(ctx, app, contract.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue, err
	})
	passwords := []string{string(first["password"])}

	for _, step := range []struct {
		what string
		edit func(map[string][]byte)
	}{
		{"the password edited", func(d map[string][]byte) { d["password"] = []byte("edited-by-hand"); d["note"] = []byte("mine") }},
		{"the password removed", func(d map[string][]byte) { delete(d, "password") }},
	} {
		t.Run(step.what, func(t *testing.T) {
			synced := watchConditions(t, app, contract.ConditionSynced)
			ready := watchConditions(t, app, contract.ConditionReady)
			before := passwords[len(passwords)-1]
			editSecret(t, ns, "drift-db", step.edit)
			repaired := connectionSecret(t, ns, "drift-db", "edited-by-hand")
			require.NotEqual(t, before, string(repaired["password"]))
			passwords = append(passwords, string(repaired["password"]))
			user, owner, err := loginAs(ctx, repaired)
			require.NoError(t, err, "the repaired Secret logs in")
			assert.Equal(t, string(repaired["username"]), user)
			assert.Equal(t, user, owner)
			assert.Equal(t, "mine", string(repaired["note"]), "a key someone else added stays")
			_, _, err = loginAs(ctx, first)
			require.Error(t, err, "the old password no longer logs in")
			eventually(t, "Synced=False ConnectionSecretDrifted, then Ready again", func(context.Context) (bool, error) {
				s, r := synced(), ready()
				return slices.Contains(s, "False ConnectionSecretDrifted") && slices.Contains(r, "False NotSynced") && len(r) > 0 && r[len(r)-1] == "True Ready", nil
			})
			c, err := condition(ctx, app, contract.ConditionSynced)
			require.NoError(t, err)
			assert.Equal(t, metav1.ConditionTrue, c.Status)
		})
	}
	var evs eventsv1.EventList
	require.NoError(t, k8s.List(ctx, &evs, client.InNamespace(ns)))
	var drifted []string
	for _, ev := range evs.Items {
		if ev.Reason == contract.ReasonConnectionSecretDrifted && ev.Regarding.Name == "drift" {
			drifted = append(drifted, ev.Note)
		}
	}
	assert.Contains(t, drifted, "resource db: connection Secret drift-db: key password changed by someone else; new credentials were set")
	noPasswordAnywhere(t, ns, logs, []*unstructured.Unstructured{app}, append(passwords, "edited-by-hand")...)
	require.NoError(t, k8s.Delete(ctx, app))
}
