package postgresql

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cuengine/engine/providers"
)

// TestPlanOnTheServer: a plan tells what Apply would do at each step of a
// database's life on a real server, and runs no statement that writes:
// create before anything exists, none once it matches, each drift Apply
// corrects, a password reset as a sensitive change without a value, and
// refusals for a rename and a foreign database.
func TestPlanOnTheServer(t *testing.T) {
	p, admin := newServerProvider(t)
	uid := "1e0c1b3a-0000-4000-8000-0000000000a1"
	fresh := providers.Request{Name: "db", Owner: providers.Owner{UID: uid, Namespace: "ns", Name: "app", Kind: "App"},
		Spec: map[string]any{"database": "planned"}}
	plan, err := p.Plan(t.Context(), fresh)
	require.NoError(t, err)
	assert.Equal(t, providers.Plan{Action: providers.ActionCreate, Changes: []providers.Change{
		{Field: "database", To: `"planned"`},
		{Field: "owner", To: `"planned"`},
		{Field: "password", Sensitive: true},
	}}, plan)

	req := request(t, p, uid, "db", fresh.Spec)
	role := req.Settings["role"]
	plan, err = p.Plan(t.Context(), req)
	require.NoError(t, err)
	assert.Equal(t, providers.Plan{Action: providers.ActionCreate, Changes: []providers.Change{
		{Field: "role", To: strconv.Quote(role)},
		{Field: "password", Sensitive: true},
		{Field: "database", To: strconv.Quote(req.ExternalName)},
		{Field: "database.owner", To: strconv.Quote(role)},
	}}, plan)
	assert.False(t, databaseExists(t, admin, req.ExternalName), "the plan created no database")
	assert.False(t, roleExists(t, admin, role), "the plan created no role")

	_, err = p.Apply(t.Context(), req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Delete(context.Background(), req) })
	plan, err = p.Plan(t.Context(), req)
	require.NoError(t, err)
	assert.Equal(t, providers.Plan{Action: providers.ActionNone}, plan)

	for _, sql := range []string{
		"ALTER ROLE " + ident(role) + " NOLOGIN",
		"ALTER DATABASE " + ident(req.ExternalName) + " OWNER TO admin",
		"COMMENT ON DATABASE " + ident(req.ExternalName) + " IS NULL",
	} {
		_, err := admin.Exec(t.Context(), sql)
		require.NoError(t, err)
	}
	// Unmarked and owned by another role: Apply refuses it as foreign, and
	// so does the plan.
	plan, err = p.Plan(t.Context(), req)
	require.NoError(t, err)
	assert.Equal(t, providers.ActionRefuse, plan.Action)
	assert.Contains(t, plan.Reason, "NameConflict: database "+strconv.Quote(req.ExternalName))
	_, err = p.Apply(t.Context(), req)
	requireConflict(t, err)

	// Marked again: the owner and LOGIN are drift Apply corrects.
	_, err = admin.Exec(t.Context(), "COMMENT ON DATABASE "+ident(req.ExternalName)+" IS "+commentLiteral(uid))
	require.NoError(t, err)
	plan, err = p.Plan(t.Context(), req)
	require.NoError(t, err)
	assert.Equal(t, providers.Plan{Action: providers.ActionUpdate, Changes: []providers.Change{
		{Field: "role.login", From: "false", To: "true"},
		{Field: "database.owner", From: `"admin"`, To: strconv.Quote(role)},
	}}, plan)
	var canLogin bool
	require.NoError(t, admin.QueryRow(t.Context(), "SELECT rolcanlogin FROM pg_roles WHERE rolname = $1", role).Scan(&canLogin))
	assert.False(t, canLogin, "the plan changed nothing")
	_, err = p.Apply(t.Context(), req)
	require.NoError(t, err)
	plan, err = p.Plan(t.Context(), req)
	require.NoError(t, err)
	assert.Equal(t, providers.ActionNone, plan.Action, "the plan was what Apply did: %v", plan)

	req.ResetCredentials = true
	plan, err = p.Plan(t.Context(), req)
	require.NoError(t, err)
	assert.Equal(t, providers.Plan{Action: providers.ActionUpdate, Changes: []providers.Change{{Field: "password", Sensitive: true}}}, plan)
	req.ResetCredentials = false

	renamed := req
	renamed.Spec = map[string]any{"database": "other"}
	plan, err = p.Plan(t.Context(), renamed)
	require.NoError(t, err)
	assert.Equal(t, providers.ActionRefuse, plan.Action)
	assert.Contains(t, plan.Reason, `ImmutableField: spec.database changed from "planned" to "other"`)
}

// requireConflict asserts err is the terminal NameConflict.
func requireConflict(t *testing.T, err error) {
	t.Helper()
	reason, retryable := providers.Classify(err)
	assert.Equal(t, providers.ReasonNameConflict, reason, "%v", err)
	assert.False(t, retryable)
}
