package providers

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nopProvider is what a build returns.
type nopProvider struct{}

func (nopProvider) ExternalName(context.Context, Request, int) (string, map[string]string, error) {
	return "built", nil, nil
}
func (nopProvider) Apply(context.Context, Request) (Observation, error) { return Observation{}, nil }
func (nopProvider) Delete(context.Context, Request) error               { return nil }
func (nopProvider) Plan(context.Context, Request) (Plan, error)         { return Plan{Action: ActionNone}, nil }

// slowBuild is a build that waits for release (or its caller's context),
// as a plugin's client construction and dial do.
type slowBuild struct {
	calls   atomic.Int32
	entered chan struct{}
	release chan struct{}
}

func newSlowBuild() *slowBuild {
	return &slowBuild{entered: make(chan struct{}, 8), release: make(chan struct{})}
}

func (b *slowBuild) build(ctx context.Context) (Provider, error) {
	b.calls.Add(1)
	b.entered <- struct{}{}
	select {
	case <-b.release:
		return nopProvider{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

const waitFor = 10 * time.Second

// receive returns what ch delivers, failing the test after waitFor.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitFor):
		t.Fatalf("%s: nothing within %s", what, waitFor)
		var zero T
		return zero
	}
}

// TestLazyCallersWaitWithTheirOwnContext: while the first call builds
// the provider, a caller whose context ends returns at once, a patient
// one waits and is served by the same build.
func TestLazyCallersWaitWithTheirOwnContext(t *testing.T) {
	b := newSlowBuild()
	l := Lazy(b.build, time.Minute)
	ctx := context.Background()

	first := make(chan error, 1)
	go func() {
		_, _, err := l.ExternalName(ctx, Request{Name: "a"}, 0)
		first <- err
	}()
	receive(t, b.entered, "the first call builds")

	gone, cancel := context.WithCancel(ctx)
	cancelled := make(chan error, 1)
	go func() {
		_, err := l.Apply(gone, Request{Name: "a"})
		cancelled <- err
	}()
	cancel()
	err := receive(t, cancelled, "a cancelled caller returns while the build runs")
	require.ErrorIs(t, err, context.Canceled)

	patient := make(chan error, 1)
	go func() { patient <- l.Delete(ctx, Request{Name: "a"}) }()
	select {
	case err := <-patient:
		t.Fatalf("a caller returned before the build ended: %v", err)
	case <-time.After(50 * time.Millisecond):
	}

	close(b.release)
	require.NoError(t, receive(t, first, "the first call"))
	require.NoError(t, receive(t, patient, "the waiting call"))
	assert.Equal(t, int32(1), b.calls.Load(), "one build")
}

// TestLazyBuilderCancelledIsNotTheOthersError: a build cut short by its
// caller's context is not recorded as the provider's failure: the next
// caller builds again at once.
func TestLazyBuilderCancelledIsNotTheOthersError(t *testing.T) {
	b := newSlowBuild()
	l := Lazy(b.build, time.Minute)

	gone, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, _, err := l.ExternalName(gone, Request{Name: "a"}, 0)
		first <- err
	}()
	receive(t, b.entered, "the first call builds")
	cancel()
	require.ErrorIs(t, receive(t, first, "the cancelled builder"), context.Canceled)

	second := make(chan error, 1)
	go func() {
		_, _, err := l.ExternalName(context.Background(), Request{Name: "a"}, 0)
		second <- err
	}()
	receive(t, b.entered, "the next call builds again")
	close(b.release)
	require.NoError(t, receive(t, second, "the second call"))
	assert.Equal(t, int32(2), b.calls.Load())
}

// TestLazyFailureIsKeptUntilRetryAfter: a failed build is every caller's
// error until retryAfter has passed; then the next call builds again.
func TestLazyFailureIsKeptUntilRetryAfter(t *testing.T) {
	var calls atomic.Int32
	fail := true
	l := Lazy(func(context.Context) (Provider, error) {
		calls.Add(1)
		if fail {
			return nil, Terminal(ReasonCredentialsError, "no credentials")
		}
		return nopProvider{}, nil
	}, time.Hour).(*lazy)
	ctx := context.Background()

	_, err := l.Apply(ctx, Request{})
	require.EqualError(t, err, "CredentialsError: no credentials")
	require.EqualError(t, l.Delete(ctx, Request{}), "CredentialsError: no credentials")
	assert.Equal(t, int32(1), calls.Load(), "no build again before retryAfter")

	fail = false
	l.mu.Lock()
	l.lastTry = time.Now().Add(-2 * time.Hour)
	l.mu.Unlock()
	name, _, err := l.ExternalName(ctx, Request{}, 0)
	require.NoError(t, err)
	assert.Equal(t, "built", name)
	assert.Equal(t, int32(2), calls.Load())
	var pe *Error
	assert.False(t, errors.As(err, &pe))
}
