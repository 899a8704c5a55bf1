package pgserver

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

func TestStartServesTheAdmin(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{Log: t.Logf})
	require.NoError(t, err)
	dir := s.dir
	conn, err := pgx.Connect(ctx, s.DSN())
	require.NoError(t, err, s.Log())
	var super bool
	require.NoError(t, conn.QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&super))
	require.True(t, super)
	require.NoError(t, conn.Close(ctx))
	require.NoError(t, s.Stop())
	require.NoDirExists(t, dir)
}
