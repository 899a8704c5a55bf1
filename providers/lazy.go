package providers

import (
	"context"
	"sync"
	"time"
)

// Lazy returns a Provider that builds the real one on first use and, while
// building fails (no credentials yet, say), returns that error from every
// call, so the engine reports it on each parent instead of refusing to
// start. Building is retried on later calls, at most once per retryAfter.
//
// One call builds, with its own context and no lock held; the calls that
// come meanwhile wait for that build, each within its own context. A build
// cut short by its caller's context is not a failure of the provider: the
// next call builds again.
func Lazy(build func(ctx context.Context) (Provider, error), retryAfter time.Duration) Provider {
	return &lazy{build: build, retryAfter: retryAfter}
}

type lazy struct {
	build      func(ctx context.Context) (Provider, error)
	retryAfter time.Duration

	// mu guards the fields below; nothing is called with it held.
	mu      sync.Mutex
	p       Provider
	err     error
	lastTry time.Time
	// building is closed when the running build ends; nil when none runs.
	building chan struct{}
}

var _ Provider = (*lazy)(nil)

func (l *lazy) get(ctx context.Context) (Provider, error) {
	for {
		l.mu.Lock()
		p, err, building := l.p, l.err, l.building
		switch {
		case p != nil:
			l.mu.Unlock()
			return p, nil
		case building != nil:
			l.mu.Unlock()
			select {
			case <-building:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		case err != nil && time.Since(l.lastTry) < l.retryAfter:
			l.mu.Unlock()
			return nil, err
		}
		done := make(chan struct{})
		l.building = done
		started := time.Now()
		l.mu.Unlock()

		p, err = l.build(ctx)

		l.mu.Lock()
		l.building = nil
		switch {
		case err == nil:
			l.p, l.err = p, nil
		case ctx.Err() == nil:
			l.err, l.lastTry = err, started
		}
		l.mu.Unlock()
		close(done)
		return p, err
	}
}

func (l *lazy) ExternalName(ctx context.Context, req Request, attempt int) (string, map[string]string, error) {
	p, err := l.get(ctx)
	if err != nil {
		return "", nil, err
	}
	return p.ExternalName(ctx, req, attempt)
}

func (l *lazy) Apply(ctx context.Context, req Request) (Observation, error) {
	p, err := l.get(ctx)
	if err != nil {
		return Observation{}, err
	}
	return p.Apply(ctx, req)
}

func (l *lazy) Delete(ctx context.Context, req Request) error {
	p, err := l.get(ctx)
	if err != nil {
		return err
	}
	return p.Delete(ctx, req)
}

func (l *lazy) Plan(ctx context.Context, req Request) (Plan, error) {
	p, err := l.get(ctx)
	if err != nil {
		return Plan{}, err
	}
	return p.Plan(ctx, req)
}
