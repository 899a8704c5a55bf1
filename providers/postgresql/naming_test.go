package postgresql

import (
	"context"

	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cuengine/engine/providers"
)

const testUID = "0b6f3c1e-8d2a-4f57-9c3e-2a1d5e7f9b10"

func TestExternalName(t *testing.T) {
	p := &Provider{}
	req := providers.Request{Name: "db", Owner: providers.Owner{UID: testUID}, Spec: map[string]any{"database": "shop"}}
	name, settings, err := p.ExternalName(context.Background(), req, 0)
	require.NoError(t, err)
	again, _, err := p.ExternalName(context.Background(), req, 0)
	require.NoError(t, err)
	assert.Equal(t, name, again, "deterministic")
	assert.Regexp(t, `^shop_[0-9a-f]{8}$`, name)
	assert.Equal(t, "shop_"+name[len("shop_"):], settings["role"], "the role shares the suffix and defaults to the database's name")
	next, _, err := p.ExternalName(context.Background(), req, 1)
	require.NoError(t, err)
	assert.NotEqual(t, name, next)
	other := req
	other.Name = "db2"
	otherName, _, err := p.ExternalName(context.Background(), other, 0)
	require.NoError(t, err)
	assert.NotEqual(t, name, otherName, "two resources of one parent get two names")

	req.Spec = map[string]any{"database": "shop", "owner": "shop_app"}
	_, settings, err = p.ExternalName(context.Background(), req, 0)
	require.NoError(t, err)
	assert.Regexp(t, `^shop_app_[0-9a-f]{8}$`, settings["role"])

	req.Spec = map[string]any{"database": strings.Repeat("a", MaxLogicalNameLen)}
	name, _, err = p.ExternalName(context.Background(), req, 0)
	require.NoError(t, err)
	assert.Len(t, name, maxIdentifierLen)
}

func TestExternalNameRefuses(t *testing.T) {
	long := strings.Repeat("a", MaxLogicalNameLen+1)
	cases := []struct {
		name string
		spec map[string]any
		uid  string
		want string
	}{
		{"SQL in the name", map[string]any{"database": `x"; DROP DATABASE postgres; --`}, testUID,
			`InvalidName: spec.database "x\"; DROP DATABASE postgres; --": character '"' at position 1 is not allowed: use lower-case letters, digits and '_', starting with a letter`},
		{"SQL in the owner", map[string]any{"database": "x", "owner": "a'b"}, testUID,
			`InvalidName: spec.owner "a'b": character '\'' at position 1 is not allowed: use lower-case letters, digits and '_', starting with a letter`},
		{"upper case", map[string]any{"database": "Shop"}, testUID,
			`InvalidName: spec.database "Shop": character 'S' at position 0 is not allowed: use lower-case letters, digits and '_', starting with a letter`},
		{"reserved", map[string]any{"database": "shop", "owner": "pg_monitor"}, testUID,
			`InvalidName: spec.owner "pg_monitor": must not start with "pg_" (reserved by PostgreSQL)`},
		{"too long", map[string]any{"database": long}, testUID,
			`InvalidName: spec.database "` + long + `" is 55 bytes; the longest allowed is 54 because the engine appends "_" and a 8-character suffix, and PostgreSQL names are at most 63 bytes`},
		{"missing", map[string]any{}, testUID, `InvalidSpec: spec.database is required`},
		{"not a string", map[string]any{"database": 3}, testUID, `InvalidSpec: spec.database must be a string, got int`},
		{"unknown field", map[string]any{"database": "x", "size": "1Gi"}, testUID, `InvalidSpec: spec.size is not a known field (known: database, owner)`},
		{"UID not a UID", map[string]any{"database": "x"}, "x'; --", `ProviderError: owner UID "x'; --" is not a Kubernetes UID (lower-case hex digits and '-')`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := (&Provider{}).ExternalName(context.Background(), providers.Request{Name: "db", Owner: providers.Owner{UID: c.uid}, Spec: c.spec}, 0)
			require.Error(t, err)
			assert.Equal(t, c.want, err.Error())
			_, retryable := providers.Classify(err)
			assert.False(t, retryable)
		})
	}
}

func TestPasswordAlphabet(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		pw, err := newPassword()
		require.NoError(t, err)
		require.Len(t, pw, passwordLen)
		_, err = passwordLiteral(pw)
		require.NoError(t, err)
		require.False(t, seen[pw])
		seen[pw] = true
	}
	_, err := passwordLiteral("a'b")
	assert.EqualError(t, err, "generated password has a character outside [A-Za-z0-9]")
}

func TestApplyChecksImmutableNames(t *testing.T) {
	p := &Provider{}
	req := providers.Request{Name: "db", Owner: providers.Owner{UID: testUID}, Spec: map[string]any{"database": "shop"}}
	name, settings, err := p.ExternalName(context.Background(), req, 0)
	require.NoError(t, err)
	req.ExternalName, req.Settings = name, settings
	req.Spec = map[string]any{"database": "store"}
	_, err = p.Apply(t.Context(), req)
	assert.EqualError(t, err, `ImmutableField: spec.database changed from "shop" to "store", but the engine does not rename databases or roles: set it back to "shop", or remove the resource and declare a new one (with deletionPolicy: "Orphan" to keep the old database)`)
	req.Spec = map[string]any{"database": "shop"}
	req.Settings = map[string]string{"role": `a"b`}
	_, err = p.Apply(t.Context(), req)
	assert.EqualError(t, err, `InvalidName: role name "a\"b": character '"' at position 1 is not allowed: use lower-case letters, digits and '_', starting with a letter`)
}
