package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cuengine/engine/internal/pgserver"
)

// startPostgres starts a throwaway PostgreSQL server for the postgresql
// provider, when one can be started, and points libpq's environment at it
// (the provider reads it when first used). It returns what to tell the
// user, and how to stop the server.
func (o *devOptions) startPostgres(ctx context.Context, stderr io.Writer) (note string, stop func()) {
	stop = func() {}
	if host := os.Getenv("PGHOST"); host != "" {
		return "Databases go to the PostgreSQL server at " + host + " (PGHOST).", stop
	}
	if !o.postgres {
		return "Databases go to the PostgreSQL server of libpq's defaults (--postgres=false).", stop
	}
	s, err := pgserver.Start(ctx, pgserver.Options{Log: func(f string, a ...any) { fmt.Fprintf(stderr, "dev: "+f+"\n", a...) }})
	if errors.Is(err, pgserver.ErrNotInstalled) {
		return "No PostgreSQL server: its binaries are not installed (" + pgserver.InstallHint + "); postgresql resources fail until PGHOST names a server.", stop
	}
	if err != nil {
		fmt.Fprintln(stderr, "dev: starting PostgreSQL:", err)
		return "No PostgreSQL server: it did not start (see above).", stop
	}
	for k, v := range s.Env() {
		os.Setenv(k, v)
	}
	stop = func() {
		fmt.Fprintln(stderr, "dev: stopping PostgreSQL")
		if err := s.Stop(); err != nil {
			fmt.Fprintln(stderr, "dev:", err)
		}
	}
	return fmt.Sprintf("Databases go to a throwaway PostgreSQL server at %s:%d (superuser %s).", s.Host, s.Port, s.User), stop
}
