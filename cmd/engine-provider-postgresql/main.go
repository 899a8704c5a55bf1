// Command engine-provider-postgresql is the postgresql provider (databases
// and their login roles on a PostgreSQL server, package
// providers/postgresql) as an engine plugin. The engine finds it in its
// --provider-dir and starts it; it is not run by hand.
//
// Its configuration is the environment it inherits from the engine:
//   - the admin connection from libpq's PGHOST, PGPORT, PGUSER, PGPASSWORD
//     and PGSSLMODE, or a connection string in the file that
//     ENGINE_POSTGRESQL_DSN_FILE names (a mounted Secret);
//   - ENGINE_POSTGRESQL_CLIENT_HOST, the host written into connection
//     Secrets when applications reach the server by another name than the
//     engine (default: the admin connection's).
//
// The pool is built on first use, so a missing or wrong admin connection is
// reported on the parents that need a database (CredentialsError), not as
// a plugin that cannot start.
package main

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/cuengine/engine/providers"
	"github.com/cuengine/engine/providers/plugin"
	"github.com/cuengine/engine/providers/postgresql"
)

// The plugin's own settings, beside libpq's PG* variables.
const (
	envDSNFile    = "ENGINE_POSTGRESQL_DSN_FILE"
	envClientHost = "ENGINE_POSTGRESQL_CLIENT_HOST"
)

func main() {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	plugin.Serve(postgresql.Name, providers.Lazy(func(ctx context.Context) (providers.Provider, error) {
		opts := postgresql.Options{ClientHost: os.Getenv(envClientHost)}
		if file := os.Getenv(envDSNFile); file != "" {
			b, err := os.ReadFile(file)
			if err != nil {
				err = providers.Terminal(providers.ReasonCredentialsError, "reading %s: %v", envDSNFile, err)
				logger.Error("PostgreSQL provider unavailable", "error", err)
				return nil, err
			}
			opts.ConnString = strings.TrimSpace(string(b))
		}
		p, err := postgresql.New(ctx, opts)
		if err != nil {
			logger.Error("PostgreSQL provider unavailable; databases cannot be managed until the admin connection is configured", "error", err)
			return nil, err
		}
		return p, nil
	}, time.Minute))
}
