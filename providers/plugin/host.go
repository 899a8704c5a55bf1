package plugin

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"

	"github.com/cuengine/engine/providers"
)

// Options configure a Plugin. Zero durations take the defaults.
type Options struct {
	// Name is the provider's name (a template's provider:), Path the
	// executable.
	Name, Path string
	// Env is added to the engine's environment for the plugin.
	Env []string
	// Logger receives the supervisor's messages and the plugin's stderr,
	// with a provider key.
	Logger logr.Logger
	// StartTimeout bounds a start: from exec to an answered handshake
	// (default 30s).
	StartTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before a restart; it doubles
	// after each failure and falls back to MinBackoff after a plugin has
	// run for StableAfter (defaults 500ms, 30s, 1m).
	MinBackoff, MaxBackoff, StableAfter time.Duration
	// StopTimeout is how long a plugin has to stop after SIGTERM before it
	// is killed (default 15s).
	StopTimeout time.Duration
	// PingInterval is how often a running plugin is asked a Handshake,
	// and PingTimeout how long it has to answer (defaults 5s, 2s). A
	// plugin that misses a ping is down until it answers one; one that
	// misses PingMisses in a row (default 3) is hung: it is killed
	// (SIGKILL to its process group) and restarted.
	PingInterval, PingTimeout time.Duration
	PingMisses                int
	// OnDemand makes Run wait, before the first start, until a call wants
	// the plugin: until then it is idle (no process, not down). From its
	// first start on it is supervised as any other.
	OnDemand bool
}

func (o *Options) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.StartTimeout, 30*time.Second)
	def(&o.MinBackoff, 500*time.Millisecond)
	def(&o.MaxBackoff, 30*time.Second)
	def(&o.StableAfter, time.Minute)
	def(&o.StopTimeout, 15*time.Second)
	def(&o.PingInterval, 5*time.Second)
	def(&o.PingTimeout, 2*time.Second)
	if o.PingMisses <= 0 {
		o.PingMisses = 3
	}
}

// Plugin is one provider plugin: Run starts and supervises its process,
// and the providers.Provider methods call it. Calls made before its first
// start is over wait for it (within their context); calls made while it is
// down after that fail at once with a retryable ProviderUnavailable.
type Plugin struct {
	opts Options
	log  logr.Logger

	// mu guards the published connection and the health below; nothing
	// is called with it held.
	mu       sync.Mutex
	conn     *grpc.ClientConn
	inflight sync.WaitGroup // calls on conn; added to under mu while conn is set
	pid      int
	down     error
	// silent says why the published plugin is down while it does not
	// answer its pings (ping.go); nil while it answers.
	silent   error
	restarts int
	// started closes once the first start has succeeded or failed: calls
	// made before wait for it, so an engine that just started does not
	// report its plugins unavailable while they are starting.
	started     chan struct{}
	startedOnce sync.Once
	// idle is true while an OnDemand plugin has not been needed yet;
	// wanted closes on the first call, which ends it.
	idle       bool
	wanted     chan struct{}
	wantedOnce sync.Once
}

var _ providers.Provider = (*Plugin)(nil)

// New returns the plugin, not started: Run starts it.
func New(opts Options) *Plugin {
	opts.defaults()
	metricUp.WithLabelValues(opts.Name).Set(0)
	metricStarted.WithLabelValues(opts.Name).Set(0)
	metricRestarts.WithLabelValues(opts.Name)
	return &Plugin{
		opts: opts, log: opts.Logger.WithValues("provider", opts.Name), down: errNoPlugin,
		started: make(chan struct{}), idle: opts.OnDemand, wanted: make(chan struct{}),
	}
}

// Name is the provider's name.
func (p *Plugin) Name() string { return p.opts.Name }

// Status is a plugin's health at one moment.
type Status struct {
	// Idle is true while an OnDemand plugin has not been needed yet: no
	// process runs, and it is not down.
	Idle bool
	// Up is true between a successful handshake and the process's exit,
	// as long as the plugin answers its pings.
	Up bool
	// Pid is the running process's (one that does not answer included),
	// 0 when none runs.
	Pid int
	// Restarts counts the starts after the first.
	Restarts int
	// Err says why the plugin is down; nil when up or idle.
	Err error
}

// String says in a few words what the plugin is doing.
func (s Status) String() string {
	switch {
	case s.Idle:
		return "idle (not needed yet)"
	case s.Up:
		return fmt.Sprintf("up (pid %d, restarts: %d)", s.Pid, s.Restarts)
	default:
		return fmt.Sprintf("down (restarts: %d): %v", s.Restarts, s.Err)
	}
}

// Status returns the plugin's health now.
func (p *Plugin) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := Status{Idle: p.idle, Up: p.conn != nil && p.silent == nil, Pid: p.pid, Restarts: p.restarts, Err: p.down}
	if p.silent != nil {
		st.Err = p.silent
	}
	if st.Idle {
		st.Err = nil
	}
	return st
}

// Health is nil while the plugin is up or idle (nothing needed it yet),
// and says why it is down otherwise.
func (p *Plugin) Health() error {
	st := p.Status()
	if st.Up || st.Idle {
		return nil
	}
	return fmt.Errorf("provider %s: plugin %s down (restarts: %d): %w", p.opts.Name, p.opts.Path, st.Restarts, st.Err)
}

// Run starts the plugin and restarts it whenever it exits or hangs (it
// misses PingMisses pings in a row), with backoff,
// until ctx ends; then it stops it (SIGTERM, then SIGKILL after
// StopTimeout) and returns nil. With OnDemand it first waits for the
// first call that wants the plugin (or for ctx to end).
func (p *Plugin) Run(ctx context.Context) error {
	defer p.startedOnce.Do(func() { close(p.started) })
	if p.opts.OnDemand {
		select {
		case <-ctx.Done():
			return nil
		case <-p.wanted:
		}
		p.log.Info("provider plugin needed; starting it", "path", p.opts.Path)
	}
	p.mu.Lock()
	p.idle = false
	p.mu.Unlock()
	metricStarted.WithLabelValues(p.opts.Name).Set(1)
	backoff := p.opts.MinBackoff
	for first := true; ; first = false {
		if !first {
			p.mu.Lock()
			p.restarts++
			p.mu.Unlock()
			metricRestarts.WithLabelValues(p.opts.Name).Inc()
		}
		started := time.Now()
		err := p.runOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			err = errors.New("exited")
		}
		p.setDown(err)
		if time.Since(started) >= p.opts.StableAfter {
			backoff = p.opts.MinBackoff
		}
		p.log.Error(err, "provider plugin down; restarting", "path", p.opts.Path, "after", backoff.String())
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		}
		backoff = min(2*backoff, p.opts.MaxBackoff)
	}
}

// publish makes conn the one calls use.
func (p *Plugin) publish(conn *grpc.ClientConn, pid int) {
	p.mu.Lock()
	p.conn, p.pid, p.down, p.silent = conn, pid, nil, nil
	p.mu.Unlock()
	metricUp.WithLabelValues(p.opts.Name).Set(1)
	p.startedOnce.Do(func() { close(p.started) })
}

func (p *Plugin) setDown(err error) {
	p.mu.Lock()
	p.conn, p.pid, p.down, p.silent = nil, 0, err, nil
	p.mu.Unlock()
	metricUp.WithLabelValues(p.opts.Name).Set(0)
	p.startedOnce.Do(func() { close(p.started) })
}

// connection returns the published connection, counted in flight until
// done is called, or the retryable error of a plugin that is down. Before
// the first start is over it waits for it, as long as ctx allows; the
// first call to an OnDemand plugin is what starts it.
func (p *Plugin) connection(ctx context.Context) (conn *grpc.ClientConn, done func(), err error) {
	p.wantedOnce.Do(func() { close(p.wanted) })
	select {
	case <-p.started:
	case <-ctx.Done():
	}
	p.mu.Lock()
	conn, down := p.conn, p.down
	if p.silent != nil {
		conn, down = nil, p.silent
	}
	if conn != nil {
		p.inflight.Add(1)
	}
	p.mu.Unlock()
	if conn == nil {
		return nil, nil, unavailable(p.opts.Name, down)
	}
	return conn, p.inflight.Done, nil
}

// drain waits, at most timeout, for the calls in flight once the plugin is
// no longer published.
func (p *Plugin) drain(timeout time.Duration) {
	drained := make(chan struct{})
	go func() { p.inflight.Wait(); close(drained) }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-drained:
	case <-t.C:
	}
}

// errNoPlugin is why a plugin is down before its first start.
var errNoPlugin = errors.New("not started yet")
