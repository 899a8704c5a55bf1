package reconciler

import (
	"context"
	"time"

	"github.com/cuengine/engine/providers"
)

// provider returns the registered provider of that name, counting its calls
// and their results on engine_provider_calls_total and
// engine_provider_call_duration_seconds: a cloud API that fails or slows
// down shows there before it shows on every parent's status.
func (r *Reconciler) provider(name string) (providers.Provider, bool) {
	p, ok := r.providers.Get(name)
	if !ok {
		return nil, false
	}
	return instrumented{Provider: p, name: name, fence: r.fence}, true
}

// instrumented is a provider whose calls to the external system are counted.
// ExternalName makes none, so it is passed through.
type instrumented struct {
	providers.Provider
	name  string
	fence func(context.Context) error
}

var _ providers.Provider = instrumented{}

func (p instrumented) Apply(ctx context.Context, req providers.Request) (providers.Observation, error) {
	if p.fence != nil {
		if err := p.fence(ctx); err != nil {
			return providers.Observation{}, err
		}
	}
	start := time.Now()
	obs, err := p.Provider.Apply(ctx, req)
	p.observe("apply", start, err)
	return obs, err
}

func (p instrumented) Delete(ctx context.Context, req providers.Request) error {
	if p.fence != nil {
		if err := p.fence(ctx); err != nil {
			return err
		}
	}
	start := time.Now()
	err := p.Provider.Delete(ctx, req)
	p.observe("delete", start, err)
	return err
}

func (p instrumented) observe(operation string, start time.Time, err error) {
	metricProviderSeconds.WithLabelValues(p.name, operation).Observe(time.Since(start).Seconds())
	result := "success"
	if err != nil {
		result, _ = providers.Classify(err)
	}
	metricProviderCalls.WithLabelValues(p.name, operation, result).Inc()
}
