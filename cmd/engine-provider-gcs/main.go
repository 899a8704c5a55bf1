// Command engine-provider-gcs is the gcs provider (Google Cloud Storage
// buckets, package providers/gcs) as an engine plugin. The engine finds it
// in its --provider-dir and starts it; it is not run by hand.
//
// It uses Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS,
// the metadata server, Workload Identity) or STORAGE_EMULATOR_HOST from the
// environment it inherits from the engine. The client is built on first
// use, so missing credentials are reported on the parents that need a
// bucket (CredentialsError), not as a plugin that cannot start.
package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/cuengine/engine/providers"
	"github.com/cuengine/engine/providers/gcs"
	"github.com/cuengine/engine/providers/plugin"
)

func main() {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	plugin.Serve(gcs.Name, providers.Lazy(func(ctx context.Context) (providers.Provider, error) {
		p, err := gcs.New(ctx, gcs.Options{})
		if err != nil {
			logger.Error("GCS provider unavailable; buckets cannot be managed until credentials are provided", "error", err)
			return nil, err
		}
		return p, nil
	}, time.Minute))
}
