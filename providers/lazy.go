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
func Lazy(build func(ctx context.Context) (Provider, error), retryAfter time.Duration) Provider {
	return &lazy{build: build, retryAfter: retryAfter}
}

type lazy struct {
	build      func(ctx context.Context) (Provider, error)
	retryAfter time.Duration

	mu      sync.Mutex
	p       Provider
	err     error
	lastTry time.Time
}

var _ Provider = (*lazy)(nil)

func (l *lazy) get(ctx context.Context) (Provider, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.p != nil {
		return l.p, nil
	}
	if l.err != nil && time.Since(l.lastTry) < l.retryAfter {
		return nil, l.err
	}
	l.lastTry = time.Now()
	p, err := l.build(ctx)
	if err != nil {
		l.err = err
		return nil, err
	}
	l.p, l.err = p, nil
	return p, nil
}

func (l *lazy) ExternalName(req Request, attempt int) (string, map[string]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := l.get(ctx)
	if err != nil {
		return "", nil, err
	}
	return p.ExternalName(req, attempt)
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
