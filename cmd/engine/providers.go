package main

import (
	"context"
	"time"

	"github.com/go-logr/logr"

	"github.com/cuengine/engine/providers"
	"github.com/cuengine/engine/providers/gcs"
)

// newProviders registers the built-in providers. Each is built on first
// use: a missing credential is reported on the parents that need it
// (Synced=False, reason CredentialsError), not as a failure to start.
func newProviders(logger logr.Logger) *providers.Registry {
	reg := providers.NewRegistry()
	reg.Register(gcs.Name, providers.Lazy(func(ctx context.Context) (providers.Provider, error) {
		p, err := gcs.New(ctx, gcs.Options{})
		if err != nil {
			logger.Error(err, "GCS provider unavailable; buckets cannot be managed until credentials are provided")
			return nil, err
		}
		return p, nil
	}, time.Minute))
	return reg
}
