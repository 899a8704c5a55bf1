package clusters

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/cuengine/engine/contract"
)

// Options configures a Registry.
type Options struct {
	// Cluster adjusts each cluster's options: its scheme, and its cache's
	// label selector so that it holds only the engine's children.
	Cluster func(*cluster.Options)
	// ProbeEvery is how often each cluster's apiserver is asked whether it
	// answers and takes the credentials (default 10s); ProbeTimeout bounds
	// one probe (default 5s).
	ProbeEvery, ProbeTimeout time.Duration
	// OnChange is called, outside any lock, with the name of a cluster
	// that was added, removed, came up or went down.
	OnChange func(name string)
	Logger   logr.Logger
}

// Registry keeps the registered clusters, started, probed and stopped as
// their registrations change. Its zero value is not usable: use New.
type Registry struct {
	opts Options

	mu       sync.Mutex
	clusters map[string]*member
	removed  map[string]removal
	// unreadable says why the registrations cannot be read, "" once
	// they are.
	unreadable string
}

// member is one registered cluster.
type member struct {
	target Target
	cl     cluster.Cluster                                  // nil when target.Err
	client authenticationv1client.AuthenticationV1Interface // for the probe
	cancel context.CancelFunc
	// Under the registry's lock:
	up       bool
	lastSeen time.Time
	err      string
}

// removal records a cluster whose registration went away.
type removal struct {
	origin string
	at     time.Time
}

// Status is what the registry knows of one cluster.
type Status struct {
	Name   string
	Origin string
	// Up: its last probe answered and took the credentials.
	Up bool
	// LastSeen is when it last answered; zero when it never did.
	LastSeen time.Time
	// Error says why it is not up.
	Error string
	// Removed: its registration went away (its children are left where
	// they are).
	Removed bool
}

// UnknownError: no cluster of that name is registered.
type UnknownError struct {
	Name string
	// Removed: it was, until its registration (Origin) went away At.
	Removed bool
	Origin  string
	At      time.Time
	// Unreadable says why the engine cannot read the registrations:
	// the cluster may well be registered.
	Unreadable string
}

func (e *UnknownError) Error() string {
	if e.Removed {
		return fmt.Sprintf("cluster %q was removed (%s deleted at %s): nothing is put there or deleted there until it is registered again",
			e.Name, e.Origin, e.At.UTC().Format(time.RFC3339))
	}
	if e.Unreadable != "" {
		return fmt.Sprintf("cluster %q is not known: the engine cannot read the cluster registrations: %s", e.Name, e.Unreadable)
	}
	return fmt.Sprintf("cluster %q is not registered (a Secret labelled engine.cuengine.dev/cluster=%s in the engine's namespace registers it)", e.Name, e.Name)
}

// UnreachableError: the cluster is registered but does not answer, or its
// registration cannot be used. Retrying may help.
type UnreachableError struct {
	Name string
	Err  error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cluster %q is unreachable: %v", e.Name, e.Err)
}
func (e *UnreachableError) Unwrap() error { return e.Err }

// New returns a registry; Run runs it.
func New(opts Options) *Registry {
	if opts.ProbeEvery <= 0 {
		opts.ProbeEvery = 10 * time.Second
	}
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = 5 * time.Second
	}
	if opts.OnChange == nil {
		opts.OnChange = func(string) {}
	}
	return &Registry{opts: opts, clusters: map[string]*member{}, removed: map[string]removal{}}
}

// Run follows src until ctx ends, starting, restarting and stopping the
// clusters it registers. It returns after every cluster it started has
// stopped, with src's error if src stopped first.
func (r *Registry) Run(ctx context.Context, src Source) error {
	var wg sync.WaitGroup
	err := src.Run(ctx, func(ts []Target) {
		r.mu.Lock()
		r.unreadable = ""
		r.mu.Unlock()
		r.update(ctx, &wg, ts)
	}, r.problem)
	r.mu.Lock()
	all := r.clusters
	r.clusters = map[string]*member{}
	r.mu.Unlock()
	for _, m := range all {
		m.cancel()
	}
	wg.Wait()
	for name := range all {
		forget(name)
	}
	return err
}

// update makes the registry hold ts: new and changed registrations are
// built outside the lock, swapped in under it, and the ones they replace
// stopped after.
func (r *Registry) update(ctx context.Context, wg *sync.WaitGroup, ts []Target) {
	r.mu.Lock()
	var fresh []Target
	for _, t := range ts {
		if m, ok := r.clusters[t.Name]; !ok || m.target.Version != t.Version {
			fresh = append(fresh, t)
		}
	}
	r.mu.Unlock()
	built := make([]*member, 0, len(fresh))
	for _, t := range fresh {
		built = append(built, r.build(t))
	}

	wanted := map[string]bool{}
	for _, t := range ts {
		wanted[t.Name] = true
	}
	var stop []*member
	var changed []string
	r.mu.Lock()
	for name, m := range r.clusters {
		if !wanted[name] {
			stop = append(stop, m)
			delete(r.clusters, name)
			r.removed[name] = removal{origin: m.target.Origin, at: time.Now()}
			changed = append(changed, name)
		}
	}
	for _, m := range built {
		if old, ok := r.clusters[m.target.Name]; ok {
			stop = append(stop, old)
		}
		r.clusters[m.target.Name] = m
		delete(r.removed, m.target.Name)
		changed = append(changed, m.target.Name)
	}
	r.mu.Unlock()

	for _, m := range stop {
		m.cancel()
	}
	for _, m := range built {
		mctx, cancel := context.WithCancel(ctx)
		m.cancel = cancel
		wg.Go(func() { r.run(mctx, m) })
	}
	for _, m := range stop {
		if _, ok := r.get(m.target.Name); !ok {
			forget(m.target.Name)
			r.opts.Logger.Info("cluster removed; its children there are left as they are", "cluster", m.target.Name, "origin", m.target.Origin)
		}
	}
	for _, name := range changed {
		r.opts.OnChange(name)
	}
}

// unthrottled copies cfg without client-go's default client-side limit
// (5 requests a second, bursts of 10) when cfg sets none, as the engine
// does for its own cluster: the workload cluster's priority and fairness
// limits govern. With the default, 500 parents each with one child in a
// workload cluster took 1m38s to create their children.
func unthrottled(cfg *rest.Config) *rest.Config {
	if cfg.QPS != 0 || cfg.RateLimiter != nil {
		return cfg
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = -1
	return cfg
}

// build makes a member for t; a registration that cannot be used, or a
// cluster that cannot be built, is a member with its error.
func (r *Registry) build(t Target) *member {
	m := &member{target: t, cancel: func() {}}
	if t.Err == nil {
		t.Config = unthrottled(t.Config)
		cl, err := cluster.New(t.Config, func(o *cluster.Options) {
			o.Logger = r.opts.Logger.WithValues("cluster", t.Name)
			if r.opts.Cluster != nil {
				r.opts.Cluster(o)
			}
		})
		if err == nil {
			m.cl = cl
			m.client, err = authenticationv1client.NewForConfig(t.Config)
		}
		if err != nil {
			m.target.Err = fmt.Errorf("%s: %w", t.Origin, err)
			m.cl = nil
		}
	}
	if m.target.Err != nil {
		m.err = m.target.Err.Error()
		r.opts.Logger.Error(m.target.Err, "cluster registration cannot be used", "cluster", t.Name)
	}
	setMetrics(t.Name, false, time.Time{})
	return m
}

// run runs one cluster's cache and its probe until ctx ends.
func (r *Registry) run(ctx context.Context, m *member) {
	if m.cl == nil {
		return // nothing to run: its error is its status
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := m.cl.Start(ctx); err != nil && ctx.Err() == nil {
			r.opts.Logger.Error(err, "cluster cache stopped", "cluster", m.target.Name)
		}
	})
	wg.Go(func() { r.probeLoop(ctx, m) })
	wg.Wait()
}

// probeLoop asks the cluster at once, then every ProbeEvery.
func (r *Registry) probeLoop(ctx context.Context, m *member) {
	ticker := time.NewTicker(r.opts.ProbeEvery)
	defer ticker.Stop()
	for {
		r.probe(ctx, m)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// probe asks the apiserver who the engine is there (a SelfSubjectReview,
// which any authenticated user may create): it proves both that the
// cluster answers and that it takes the credentials.
func (r *Registry) probe(ctx context.Context, m *member) {
	pctx, cancel := context.WithTimeout(ctx, r.opts.ProbeTimeout)
	_, err := m.client.SelfSubjectReviews().Create(pctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	cancel()
	if ctx.Err() != nil {
		return
	}
	// The text goes to the parents' status (ClusterUnreachable): a body
	// the address answered with in place of a Kubernetes Status is cut
	// from it, and logged in full at debug level.
	full := err
	err = contract.PlainAnswer(err)
	if err != full {
		r.opts.Logger.V(1).Info("a workload cluster's answer in full", "cluster", m.target.Name, "error", full.Error())
	}
	now := time.Now()
	r.mu.Lock()
	was := m.up
	m.up = err == nil
	if err == nil {
		m.lastSeen, m.err = now, ""
	} else {
		m.err = err.Error()
	}
	up, seen := m.up, m.lastSeen
	current := r.clusters[m.target.Name] == m
	r.mu.Unlock()
	if !current {
		return
	}
	setMetrics(m.target.Name, up, seen)
	if was != up {
		if up {
			r.opts.Logger.Info("cluster answers", "cluster", m.target.Name)
		} else {
			r.opts.Logger.Error(err, "cluster does not answer; nothing is deleted because of it", "cluster", m.target.Name)
		}
		r.opts.OnChange(m.target.Name)
	}
}

// Unanswered marks the named cluster down now, with err as the reason: a
// call to it ran past its deadline. Until its next probe answers, Get
// reports it unreachable at once, so that no other reconcile waits out a
// deadline of its own on it; the probe that answers brings it back, and
// OnChange requeues its parents then as on any change.
func (r *Registry) Unanswered(name string, err error) {
	r.mu.Lock()
	m, ok := r.clusters[name]
	was := ok && m.up
	if was {
		m.up, m.err = false, contract.PlainAnswer(err).Error()
	}
	var seen time.Time
	if ok {
		seen = m.lastSeen
	}
	r.mu.Unlock()
	if !was {
		return
	}
	setMetrics(name, false, seen)
	r.opts.Logger.Error(contract.PlainAnswer(err), "cluster does not answer a call; it is reported down until its probe answers, and nothing is deleted because of it", "cluster", name)
	r.opts.OnChange(name)
}

func (r *Registry) get(name string) (*member, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.clusters[name]
	return m, ok
}

// Get returns the named cluster when it answers, or an UnknownError or
// UnreachableError saying why not.
func (r *Registry) Get(name string) (cluster.Cluster, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.clusters[name]
	if !ok {
		rm, was := r.removed[name]
		return nil, &UnknownError{Name: name, Removed: was, Origin: rm.origin, At: rm.at, Unreadable: r.unreadable}
	}
	switch {
	case m.target.Err != nil:
		return nil, &UnreachableError{Name: name, Err: m.target.Err}
	case !m.up && m.err != "":
		return nil, &UnreachableError{Name: name, Err: errors.New(m.err)}
	case !m.up:
		return nil, &UnreachableError{Name: name, Err: errors.New("not reached yet")}
	}
	return m.cl, nil
}

// problem records why the registrations cannot be read: every cluster
// not known yet is reported with it, and the first time it changes it is
// logged as an error.
func (r *Registry) problem(err error) {
	msg := err.Error()
	r.mu.Lock()
	changed := r.unreadable != msg
	r.unreadable = msg
	r.mu.Unlock()
	if changed {
		r.opts.Logger.Error(err, "the cluster registrations cannot be read; the clusters they register are reported unknown")
		r.opts.OnChange("")
	}
}

// Unreadable says why the registrations cannot be read, "" when they can.
func (r *Registry) Unreadable() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unreadable
}

// Status lists every registered and removed cluster, by name.
func (r *Registry) Status() []Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Status, 0, len(r.clusters)+len(r.removed))
	for name, m := range r.clusters {
		out = append(out, Status{Name: name, Origin: m.target.Origin, Up: m.up, LastSeen: m.lastSeen, Error: m.err})
	}
	for name, rm := range r.removed {
		out = append(out, Status{Name: name, Origin: rm.origin, Removed: true, Error: (&UnknownError{Name: name, Removed: true, Origin: rm.origin, At: rm.at}).Error()})
	}
	slices.SortFunc(out, func(a, b Status) int { return strings.Compare(a.Name, b.Name) })
	return out
}
