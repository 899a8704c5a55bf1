package main

import (
	"context"

	"github.com/go-logr/logr"

	"github.com/cuengine/engine/providers"
)

// newProviders registers the built-in providers.
func newProviders(ctx context.Context, logger logr.Logger) *providers.Registry {
	reg := providers.NewRegistry()
	_ = ctx
	_ = logger
	return reg
}
