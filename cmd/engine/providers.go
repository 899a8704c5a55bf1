package main

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/cuengine/engine/providers"
	"github.com/cuengine/engine/providers/gcs"
	"github.com/cuengine/engine/providers/postgresql"
)

// postgresOptions are the flags of the postgresql provider.
type postgresOptions struct {
	// dsnFile holds the admin connection string; empty means libpq's
	// environment.
	dsnFile    string
	clientHost string
}

// newProviders registers the built-in providers. Each is built on first
// use: a missing credential is reported on the parents that need it
// (Synced=False, reason CredentialsError), not as a failure to start.
func newProviders(logger logr.Logger, pg postgresOptions) *providers.Registry {
	reg := providers.NewRegistry()
	reg.Register(gcs.Name, providers.Lazy(func(ctx context.Context) (providers.Provider, error) {
		p, err := gcs.New(ctx, gcs.Options{})
		if err != nil {
			logger.Error(err, "GCS provider unavailable; buckets cannot be managed until credentials are provided")
			return nil, err
		}
		return p, nil
	}, time.Minute))
	reg.Register(postgresql.Name, providers.Lazy(func(ctx context.Context) (providers.Provider, error) {
		opts := postgresql.Options{ClientHost: pg.clientHost}
		if pg.dsnFile != "" {
			b, err := os.ReadFile(pg.dsnFile)
			if err != nil {
				err = providers.Terminal(providers.ReasonCredentialsError, "reading --postgresql-dsn-file: %v", err)
				logger.Error(err, "PostgreSQL provider unavailable")
				return nil, err
			}
			opts.ConnString = strings.TrimSpace(string(b))
		}
		p, err := postgresql.New(ctx, opts)
		if err != nil {
			logger.Error(err, "PostgreSQL provider unavailable; databases cannot be managed until the admin connection is configured")
			return nil, err
		}
		return p, nil
	}, time.Minute))
	return reg
}
