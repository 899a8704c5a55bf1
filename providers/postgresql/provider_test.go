package postgresql

import (
	"context"
	"net"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cuengine/engine/providers"
)

// newServerProvider returns a provider on the package's server, its admin
// connection from libpq's environment as in production.
func newServerProvider(t *testing.T) (*Provider, *pgx.Conn) {
	t.Helper()
	s := pg.Get(t)
	for k, v := range s.Env() {
		t.Setenv(k, v)
	}
	p, err := New(t.Context(), Options{})
	require.NoError(t, err)
	t.Cleanup(p.Close)
	admin, err := pgx.Connect(t.Context(), s.DSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	return p, admin
}

// request names a resource for owner uid the way the engine does: the
// names from ExternalName, recorded, then passed to every call.
func request(t *testing.T, p *Provider, uid, local string, spec map[string]any) providers.Request {
	t.Helper()
	req := providers.Request{Name: local, Owner: providers.Owner{UID: uid, Namespace: "ns", Name: "app", Kind: "App"}, Spec: spec}
	name, settings, err := p.ExternalName(context.Background(), req, 0)
	require.NoError(t, err)
	req.ExternalName, req.Settings = name, settings
	return req
}

func exists(t *testing.T, admin *pgx.Conn, catalog, column, name string) bool {
	t.Helper()
	var n int
	require.NoError(t, admin.QueryRow(t.Context(), "SELECT count(*) FROM "+catalog+" WHERE "+column+" = $1", name).Scan(&n))
	return n == 1
}

func databaseExists(t *testing.T, admin *pgx.Conn, name string) bool {
	return exists(t, admin, "pg_database", "datname", name)
}

func roleExists(t *testing.T, admin *pgx.Conn, name string) bool {
	return exists(t, admin, "pg_roles", "rolname", name)
}

// login connects with the connection outputs and says who owns the
// database it lands in.
func login(t *testing.T, sensitive map[string][]byte) (user, owner string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), string(sensitive[KeyURI]))
	require.NoError(t, err)
	defer conn.Close(context.Background())
	require.NoError(t, conn.QueryRow(t.Context(),
		`SELECT current_user, pg_get_userbyid(datdba) FROM pg_database WHERE datname = current_database()`).Scan(&user, &owner))
	return user, owner
}

func TestApplyCreatesDatabaseAndRole(t *testing.T) {
	p, admin := newServerProvider(t)
	uid := "1e0c1b3a-0000-4000-8000-000000000001"
	req := request(t, p, uid, "db", map[string]any{"database": "shop"})
	role := req.Settings["role"]

	obs, err := p.Apply(t.Context(), req)
	require.NoError(t, err)
	assert.True(t, obs.Exists)
	assert.True(t, obs.Ready)
	s := pg.Get(t)
	assert.Equal(t, map[string]any{"database": req.ExternalName, "role": role, "host": s.Host, "port": strconv.Itoa(s.Port)}, obs.State)
	password := string(obs.Sensitive[KeyPassword])
	require.Len(t, password, passwordLen)
	assert.Equal(t, role, string(obs.Sensitive[KeyUsername]))
	assert.Equal(t, req.ExternalName, string(obs.Sensitive[KeyDatabase]))
	assert.Equal(t, "postgresql://"+role+":"+password+"@"+net.JoinHostPort(s.Host, strconv.Itoa(s.Port))+"/"+req.ExternalName+"?sslmode=disable", string(obs.Sensitive[KeyURI]))
	for k, v := range obs.State {
		assert.NotContains(t, v, password, "state %s", k)
	}

	user, owner := login(t, obs.Sensitive)
	assert.Equal(t, role, user)
	assert.Equal(t, role, owner, "the role owns its database")

	// Idempotent: a second Apply changes nothing and knows no password.
	again, err := p.Apply(t.Context(), req)
	require.NoError(t, err)
	assert.NotContains(t, again.Sensitive, KeyPassword)
	assert.NotContains(t, again.Sensitive, KeyURI)
	assert.Equal(t, role, string(again.Sensitive[KeyUsername]))
	login(t, obs.Sensitive) // the first password still works

	// A reset issues a new password; the old one stops working.
	req.ResetCredentials = true
	reset, err := p.Apply(t.Context(), req)
	require.NoError(t, err)
	require.NotEqual(t, password, string(reset.Sensitive[KeyPassword]))
	login(t, reset.Sensitive)
	_, err = pgx.Connect(t.Context(), string(obs.Sensitive[KeyURI]))
	require.Error(t, err)

	require.NoError(t, p.Delete(t.Context(), req))
	assert.False(t, databaseExists(t, admin, req.ExternalName))
	assert.False(t, roleExists(t, admin, role))
	require.NoError(t, p.Delete(t.Context(), req), "deleting what is gone is success")
}

func TestApplyCorrectsDrift(t *testing.T) {
	p, admin := newServerProvider(t)
	uid := "1e0c1b3a-0000-4000-8000-000000000002"
	req := request(t, p, uid, "db", map[string]any{"database": "drift", "owner": "drift_app"})
	role := req.Settings["role"]
	_, err := p.Apply(t.Context(), req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Delete(context.Background(), req) })

	// The database dropped out of band comes back, owned by the role.
	_, err = admin.Exec(t.Context(), "DROP DATABASE "+ident(req.ExternalName))
	require.NoError(t, err)
	_, err = p.Apply(t.Context(), req)
	require.NoError(t, err)
	require.True(t, databaseExists(t, admin, req.ExternalName))

	// The role dropped (its database first, since it owns it) comes back
	// with a new password.
	_, err = admin.Exec(t.Context(), "DROP DATABASE "+ident(req.ExternalName))
	require.NoError(t, err)
	_, err = admin.Exec(t.Context(), "DROP ROLE "+ident(role))
	require.NoError(t, err)
	obs, err := p.Apply(t.Context(), req)
	require.NoError(t, err)
	user, owner := login(t, obs.Sensitive)
	assert.Equal(t, role, user)
	assert.Equal(t, role, owner)

	// LOGIN taken away and the owner changed are put back.
	_, err = admin.Exec(t.Context(), "ALTER ROLE "+ident(role)+" NOLOGIN")
	require.NoError(t, err)
	_, err = admin.Exec(t.Context(), "ALTER DATABASE "+ident(req.ExternalName)+" OWNER TO admin")
	require.NoError(t, err)
	_, err = p.Apply(t.Context(), req)
	require.NoError(t, err)
	user, owner = login(t, obs.Sensitive)
	assert.Equal(t, role, user, "LOGIN is back")
	assert.Equal(t, role, owner, "and so is the owner")

	// A database left unmarked by a crash between CREATE and COMMENT is
	// ours through its owner, and gets its mark back.
	_, err = admin.Exec(t.Context(), "COMMENT ON DATABASE "+ident(req.ExternalName)+" IS NULL")
	require.NoError(t, err)
	_, err = p.Apply(t.Context(), req)
	require.NoError(t, err)
	var comment string
	require.NoError(t, admin.QueryRow(t.Context(), "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1", req.ExternalName).Scan(&comment))
	assert.Equal(t, ownerMark(uid), comment)
}

func TestForeignObjectsAreNameConflicts(t *testing.T) {
	p, admin := newServerProvider(t)
	uid := "1e0c1b3a-0000-4000-8000-000000000003"
	req := request(t, p, uid, "db", map[string]any{"database": "taken"})
	role := req.Settings["role"]

	// Someone else's database under our name: never touched, never dropped.
	_, err := admin.Exec(t.Context(), "CREATE DATABASE "+ident(req.ExternalName))
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+ident(req.ExternalName)) })
	_, err = p.Apply(t.Context(), req)
	require.Error(t, err)
	reason, retryable := providers.Classify(err)
	assert.Equal(t, providers.ReasonNameConflict, reason)
	assert.False(t, retryable)
	assert.Equal(t, `NameConflict: database "`+req.ExternalName+`" exists but is not owned by this object (no ownership comment, want engine-owner-uid=`+uid+`); it is left untouched and a new name is needed`, err.Error())
	assert.False(t, roleExists(t, admin, role), "no role is created for a database we cannot have")
	err = p.Delete(t.Context(), req)
	reason, _ = providers.Classify(err)
	assert.Equal(t, providers.ReasonNameConflict, reason)
	assert.True(t, databaseExists(t, admin, req.ExternalName), "a foreign database is never dropped")

	// Another owner's mark is a conflict too.
	_, err = admin.Exec(t.Context(), "COMMENT ON DATABASE "+ident(req.ExternalName)+" IS 'engine-owner-uid=someone-else'")
	require.NoError(t, err)
	_, err = p.Apply(t.Context(), req)
	assert.ErrorContains(t, err, "(comment engine-owner-uid=someone-else, want engine-owner-uid="+uid+")")

	// Someone else's role under our role's name.
	other := request(t, p, uid, "other", map[string]any{"database": "taken2"})
	_, err = admin.Exec(t.Context(), "CREATE ROLE "+ident(other.Settings["role"]))
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+ident(other.Settings["role"])) })
	_, err = p.Apply(t.Context(), other)
	assert.Equal(t, `NameConflict: role "`+other.Settings["role"]+`" exists but is not owned by this object (no ownership comment, want engine-owner-uid=`+uid+`); it is left untouched and a new name is needed`, err.Error())
	assert.False(t, databaseExists(t, admin, other.ExternalName))
	err = p.Delete(t.Context(), other)
	reason, _ = providers.Classify(err)
	assert.Equal(t, providers.ReasonNameConflict, reason)
	assert.True(t, roleExists(t, admin, other.Settings["role"]), "a foreign role is never dropped")
}

func TestSQLInNamesRunsNothing(t *testing.T) {
	p, admin := newServerProvider(t)
	uid := "1e0c1b3a-0000-4000-8000-000000000004"
	evil := `x"; DROP DATABASE postgres; --`
	var before int
	require.NoError(t, admin.QueryRow(t.Context(), "SELECT count(*) FROM pg_database").Scan(&before))
	for _, spec := range []map[string]any{{"database": evil}, {"database": "ok", "owner": evil}} {
		_, _, err := p.ExternalName(context.Background(), providers.Request{Name: "db", Owner: providers.Owner{UID: uid}, Spec: spec}, 0)
		reason, _ := providers.Classify(err)
		assert.Equal(t, providers.ReasonInvalidName, reason)
	}
	// A name recorded by hand on the parent is checked again before use.
	req := providers.Request{Name: "db", ExternalName: evil, Owner: providers.Owner{UID: uid},
		Settings: map[string]string{"role": "ok_12345678"}, Spec: map[string]any{"database": "x"}}
	_, err := p.Apply(t.Context(), req)
	reason, _ := providers.Classify(err)
	assert.Equal(t, providers.ReasonInvalidName, reason)
	err = p.Delete(t.Context(), req)
	reason, _ = providers.Classify(err)
	assert.Equal(t, providers.ReasonInvalidName, reason)
	var after int
	require.NoError(t, admin.QueryRow(t.Context(), "SELECT count(*) FROM pg_database").Scan(&after))
	assert.Equal(t, before, after)
	assert.True(t, databaseExists(t, admin, "postgres"))
}

func TestDeleteEndsSessions(t *testing.T) {
	p, admin := newServerProvider(t)
	req := request(t, p, "1e0c1b3a-0000-4000-8000-000000000005", "db", map[string]any{"database": "busy"})
	obs, err := p.Apply(t.Context(), req)
	require.NoError(t, err)
	app, err := pgx.Connect(t.Context(), string(obs.Sensitive[KeyURI]))
	require.NoError(t, err)
	defer app.Close(context.Background())
	require.NoError(t, p.Delete(t.Context(), req))
	assert.False(t, databaseExists(t, admin, req.ExternalName))
	assert.False(t, roleExists(t, admin, req.Settings["role"]))
}

func TestErrorsKeepTheAdminPasswordOut(t *testing.T) {
	s := pg.Get(t)
	cases := []struct {
		name   string
		env    map[string]string
		reason string
		retry  bool
	}{
		{"wrong password", map[string]string{"PGPASSWORD": "not-the-password-s3cr3t"}, providers.ReasonCredentialsError, false},
		{"nothing listening", map[string]string{"PGPORT": "1", "PGPASSWORD": "not-the-password-s3cr3t"}, providers.ReasonUnavailable, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range s.Env() {
				t.Setenv(k, v)
			}
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			p, err := New(t.Context(), Options{})
			require.NoError(t, err)
			defer p.Close()
			req := request(t, p, "1e0c1b3a-0000-4000-8000-000000000006", "db", map[string]any{"database": "x"})
			_, err = p.Apply(t.Context(), req)
			require.Error(t, err)
			reason, retryable := providers.Classify(err)
			assert.Equal(t, c.reason, reason, err.Error())
			assert.Equal(t, c.retry, retryable)
			assert.NotContains(t, err.Error(), "s3cr3t")
			assert.NotContains(t, err.Error(), s.Password)
		})
	}
}

func TestInsufficientPrivilegesAreCredentialsErrors(t *testing.T) {
	s := pg.Get(t)
	_, admin := newServerProvider(t)
	_, err := admin.Exec(t.Context(), "CREATE ROLE weak LOGIN PASSWORD 'weakpw'")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP ROLE weak") })
	p, err := New(t.Context(), Options{ConnString: "host=" + s.Host + " port=" + strconv.Itoa(s.Port) + " user=weak password=weakpw dbname=postgres sslmode=disable"})
	require.NoError(t, err)
	defer p.Close()
	req := request(t, p, "1e0c1b3a-0000-4000-8000-000000000007", "db", map[string]any{"database": "x"})
	_, err = p.Apply(t.Context(), req)
	reason, retryable := providers.Classify(err)
	assert.Equal(t, providers.ReasonCredentialsError, reason, err.Error())
	assert.False(t, retryable)
	assert.Equal(t, `CredentialsError: creating role "`+req.Settings["role"]+`": ERROR: permission denied to create role (SQLSTATE 42501); set PGHOST, PGPORT, PGUSER, PGPASSWORD and PGSSLMODE, or ENGINE_POSTGRESQL_DSN_FILE; the admin role needs CREATEDB and CREATEROLE`, err.Error())
	assert.NotContains(t, err.Error(), "weakpw")
}

// TestMinimalAdminRole: an admin role with exactly the documented rights
// (LOGIN CREATEDB CREATEROLE, no superuser) creates a database with its
// role, resets its password, and drops both. On PostgreSQL 15 a database
// created with another owner needs the creator to be a member of that
// owner: without it the role was left without its database.
func TestMinimalAdminRole(t *testing.T) {
	s := pg.Get(t)
	_, admin := newServerProvider(t)
	_, err := admin.Exec(t.Context(), "CREATE ROLE minimal LOGIN PASSWORD 'minimalpw' CREATEDB CREATEROLE")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP ROLE minimal") })
	var super bool
	require.NoError(t, admin.QueryRow(t.Context(), "SELECT rolsuper FROM pg_roles WHERE rolname = 'minimal'").Scan(&super))
	require.False(t, super)
	p, err := New(t.Context(), Options{ConnString: "host=" + s.Host + " port=" + strconv.Itoa(s.Port) + " user=minimal password=minimalpw dbname=postgres sslmode=disable"})
	require.NoError(t, err)
	defer p.Close()
	req := request(t, p, "1e0c1b3a-0000-4000-8000-000000000008", "db", map[string]any{"database": "minimal"})
	role := req.Settings["role"]

	obs, err := p.Apply(t.Context(), req)
	require.NoError(t, err)
	assert.True(t, databaseExists(t, admin, req.ExternalName))
	user, owner := login(t, obs.Sensitive)
	assert.Equal(t, role, user)
	assert.Equal(t, role, owner)

	again, err := p.Apply(t.Context(), req)
	require.NoError(t, err)
	assert.Empty(t, again.Sensitive[KeyPassword], "no new password unasked")
	req.ResetCredentials = true
	reset, err := p.Apply(t.Context(), req)
	require.NoError(t, err)
	require.NotEmpty(t, reset.Sensitive[KeyPassword])
	user, _ = login(t, reset.Sensitive)
	assert.Equal(t, role, user)

	require.NoError(t, p.Delete(t.Context(), req))
	assert.False(t, databaseExists(t, admin, req.ExternalName))
	assert.False(t, roleExists(t, admin, role))
}
