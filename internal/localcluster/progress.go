package localcluster

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

const (
	// pollInterval is how often start-up readiness conditions are checked.
	pollInterval = 100 * time.Millisecond
	// heartbeatInterval is how often a long wait reports that it is still
	// waiting, so start-up is never silent for long.
	heartbeatInterval = 5 * time.Second
	// checkTimeout bounds one readiness probe.
	checkTimeout = 5 * time.Second
)

// progress writes start-up progress lines; a nil writer makes it silent.
type progress struct {
	mu sync.Mutex
	w  io.Writer
}

// printf writes one progress line.
func (p *progress) printf(format string, args ...any) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "localcluster: "+format+"\n", args...)
}

// heartbeat reports every heartbeatInterval that what is still going on,
// until the returned function is called.
func (p *progress) heartbeat(what string) (stop func()) {
	start := time.Now()
	quit := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		ticker := time.NewTicker(heartbeatInterval)
		defer ticker.Stop()
		for {
			select {
			case <-quit:
				return
			case <-ticker.C:
				p.printf("still %s (%s so far)", what, since(start))
			}
		}
	}()
	return func() {
		close(quit)
		<-finished
	}
}

// since formats the time elapsed since start to a tenth of a second.
func since(start time.Time) time.Duration {
	return time.Since(start).Round(100 * time.Millisecond)
}

// waitSpec describes one bounded wait during start-up.
type waitSpec struct {
	what    string        // "for node kwok-node-0 to be Ready"
	done    string        // "node kwok-node-0 Ready"
	timeout time.Duration // upper bound for this wait
	// check reports whether the condition holds; an error is remembered and
	// reported only if the wait times out.
	check func(ctx context.Context) (bool, error)
	// blame is the process whose log is quoted if the wait times out; may
	// be nil.
	blame *process
	// alive returns an error once a process the wait depends on has exited;
	// may be nil.
	alive func() error
}

// wait polls s.check every pollInterval until it holds, reporting progress.
func (p *progress) wait(ctx context.Context, s waitSpec) error {
	start := time.Now()
	p.printf("waiting %s...", s.what)
	stopBeat := p.heartbeat("waiting " + s.what)
	defer stopBeat()
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	var lastErr error
	for {
		if s.alive != nil {
			if err := s.alive(); err != nil {
				return err
			}
		}
		ok, err := s.probe(ctx)
		if ok {
			p.printf("%s (%s)", s.done, since(start))
			return nil
		}
		if err != nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			return s.timedOut(ctx.Err(), lastErr, since(start))
		case <-ticker.C:
		}
	}
}

// probe runs s.check once, bounded by checkTimeout.
func (s waitSpec) probe(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	return s.check(ctx)
}

// timedOut builds the error for a wait that did not succeed in time.
func (s waitSpec) timedOut(ctxErr, lastErr error, elapsed time.Duration) error {
	err := fmt.Errorf("waiting %s: gave up after %s: %w", s.what, elapsed, ctxErr)
	if lastErr != nil {
		err = fmt.Errorf("%w (last error: %v)", err, lastErr)
	}
	if s.blame != nil {
		err = s.blame.failure(err)
	}
	return err
}
