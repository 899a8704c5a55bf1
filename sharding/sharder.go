package sharding

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/cuengine/engine/contract"
)

var metricMoves = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "engine_sharder_assignments_total",
	Help: "Parent label writes by the sharder, by action: assign (a parent without a shard), drain (asked its live shard to give it up), reassign (taken from a shard whose lease expired).",
}, []string{"action"})

func init() {
	metrics.Registry.MustRegister(metricMoves)
	for _, a := range []action{actAssign, actDrain, actReassign} {
		metricMoves.WithLabelValues(string(a))
	}
}

// Sharder assigns every parent of every templated kind to a live shard,
// on the elected leader. It keeps no state of its own: each pass reads the
// live shards from their Leases and the parents' labels from a metadata-only
// cache, and writes the label changes that bring each parent closer to the
// shard the ring gives it:
//
//   - no shard (new, or released after a drain): assign the ring's shard;
//   - on a shard whose Lease expired: reassign at once (the shard stopped
//     reconciling when it could not renew: Member);
//   - on a live shard that is not the ring's: mark it draining, and wait
//     for that shard to release it (remove both labels) before the next
//     pass assigns it, so the two never reconcile it at the same time.
//
// Every write is conditional on the resourceVersion read (a conflict means
// another writer went first: the next pass looks again).
type Sharder struct {
	// Client writes the parents' labels.
	Client client.Client
	// Cache serves the parents' metadata (every kind, every shard): the
	// manager's cache, which watches metav1.PartialObjectMetadata as
	// metadata only.
	Cache Parents
	// Leases reads the shards' Leases.
	Leases client.Reader
	// Kinds returns the parent kinds to shard.
	Kinds func() []schema.GroupVersionKind
	// Namespace of the Leases, Group of the shards (contract.LabelShardGroup).
	Namespace, Group string
	// Scope restricts the parents to one namespace; "" is all.
	Scope string
	// Every is how often the sharder looks even without an event (a Lease
	// expires without one).
	Every time.Duration
	// OnElected is told when this replica becomes the sharder and stops.
	OnElected func(bool)
	// Fence, when set, says whether this replica may still write as the
	// sharder (Leadership): checked at the start
	// of each pass and before each write, so a sharder paused past its
	// leadership (SIGSTOP, a frozen VM) does not write, once it runs
	// again, the labels it decided before the pause.
	Fence func(context.Context) error

	wake     chan struct{}
	mu       sync.Mutex
	watching map[schema.GroupVersionKind]*kindWatch
}

// Parents is what the sharder needs of a cache.
type Parents interface {
	client.Reader
	GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error)
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: one sharder.
func (s *Sharder) NeedLeaderElection() bool { return true }

// Start implements manager.Runnable: it passes over the parents on every
// change of a parent's labels, and every s.Every, until ctx ends.
func (s *Sharder) Start(ctx context.Context) error {
	s.wake = make(chan struct{}, 1)
	s.watching = map[schema.GroupVersionKind]*kindWatch{}
	if s.OnElected != nil {
		s.OnElected(true)
		defer s.OnElected(false)
	}
	logger := log.FromContext(ctx).WithName("sharder")
	logger.Info("sharding parents over the live shards")
	ctx = log.IntoContext(ctx, logger)
	for {
		if err := s.pass(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "sharding pass failed; retrying")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
		case <-time.After(s.Every):
		}
	}
}

func (s *Sharder) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// passWriters is how many label writes a pass has in flight. One at a
// time, assignment was bound by the apiserver's round trip: about 40
// parents a second on a loaded machine, two minutes for 5000 new parents,
// twice the time the engine took to create their children
// (docs/benchmarks.md, Sharding).
const passWriters = 16

// pass brings every parent one step closer to its shard.
func (s *Sharder) pass(ctx context.Context) error {
	if err := s.fenced(ctx); err != nil {
		return err
	}
	shards, err := liveShards(ctx, s.Leases, s.Namespace, s.Group, time.Now())
	if err != nil {
		return err
	}
	if len(shards) == 0 {
		return nil // nobody to give parents to; they wait where they are
	}
	ring := NewRing(shards)
	alive := map[string]bool{}
	for _, id := range shards {
		alive[id] = true
	}
	var (
		mu   sync.Mutex
		errs []error
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}
	writes := errgroup.Group{}
	writes.SetLimit(passWriters)
	for _, gvk := range s.Kinds() {
		if err := s.watch(ctx, gvk); err != nil {
			fail(err)
			continue
		}
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		var opts []client.ListOption
		if s.Scope != "" {
			opts = append(opts, client.InNamespace(s.Scope))
		}
		// The items share their maps with the cache: write copies the one
		// it changes.
		opts = append(opts, client.UnsafeDisableDeepCopy)
		if err := s.Cache.List(ctx, list, opts...); err != nil {
			fail(fmt.Errorf("listing %s: %w", gvk.Kind, err))
			continue
		}
		for i := range list.Items {
			p := &list.Items[i]
			act, shard := decide(p.GetLabels(), string(p.GetUID()), alive, ring)
			if act == actNone {
				continue
			}
			writes.Go(func() error {
				if err := s.write(ctx, gvk, p, act, shard); err != nil {
					fail(err)
				}
				return nil
			})
		}
	}
	_ = writes.Wait() // the writes report to fail
	if len(errs) > 0 {
		return fmt.Errorf("%d writes or kinds failed, the first: %w", len(errs), errs[0])
	}
	return nil
}

// action is what a pass does to one parent.
type action string

const (
	actNone     action = ""
	actAssign   action = "assign"
	actDrain    action = "drain"
	actReassign action = "reassign"
)

// decide is the state machine of one parent: from its labels, the live
// shards and the ring, the next write (and the shard it names).
func decide(labels map[string]string, uid string, alive map[string]bool, ring *Ring) (action, string) {
	cur, draining := labels[contract.LabelShard], labels[contract.LabelDrain] != ""
	want := ring.Get(uid)
	switch {
	case want == "":
		return actNone, ""
	case cur == "":
		return actAssign, want
	case !alive[cur]:
		return actReassign, want
	case cur == want || draining:
		// Home, or its shard has been asked to let go: wait for it.
		return actNone, ""
	default:
		return actDrain, cur
	}
}

// write applies one decision to a copy of a parent of kind gvk,
// conditional on its version.
func (s *Sharder) write(ctx context.Context, gvk schema.GroupVersionKind, p *metav1.PartialObjectMetadata, act action, shard string) error {
	if err := s.fenced(ctx); err != nil {
		return err
	}
	p = p.DeepCopy()
	p.SetGroupVersionKind(gvk)
	before := p.DeepCopy()
	labels := maps.Clone(p.GetLabels())
	if labels == nil {
		labels = map[string]string{}
	}
	switch act {
	case actAssign, actReassign:
		labels[contract.LabelShard] = shard
		delete(labels, contract.LabelDrain)
	case actDrain:
		labels[contract.LabelDrain] = "true"
	}
	p.SetLabels(labels)
	if err := s.Client.Patch(ctx, p, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("%s of %s %s/%s: %w", act, p.Kind, p.GetNamespace(), p.GetName(), err))
	}
	metricMoves.WithLabelValues(string(act)).Inc()
	log.FromContext(ctx).V(1).Info("shard label written", "action", string(act), "shard", shard, "kind", p.Kind, "object", p.GetNamespace()+"/"+p.GetName())
	return nil
}

// fenced returns why this replica may not write as the sharder, or nil.
func (s *Sharder) fenced(ctx context.Context) error {
	if s.Fence == nil {
		return nil
	}
	if err := s.Fence(ctx); err != nil {
		return fmt.Errorf("not writing shard labels: %w", err)
	}
	return nil
}

// kindWatch is the registration of one kind's label handler: done is
// closed when it finished, err says how.
type kindWatch struct {
	done chan struct{}
	err  error
}

// watch makes label changes of a kind's parents wake the sharder. The
// first caller for a kind marks it under s.mu and starts the informer
// (a whole first LIST) outside the lock; a concurrent caller for the same
// kind waits for it, or for its own ctx.
func (s *Sharder) watch(ctx context.Context, gvk schema.GroupVersionKind) error {
	s.mu.Lock()
	w, started := s.watching[gvk]
	if !started {
		w = &kindWatch{done: make(chan struct{})}
		s.watching[gvk] = w
	}
	s.mu.Unlock()
	if started {
		select {
		case <-w.done:
			return w.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	w.err = s.addHandler(ctx, gvk)
	if w.err != nil {
		s.mu.Lock()
		delete(s.watching, gvk) // the next pass tries again
		s.mu.Unlock()
	}
	close(w.done)
	return w.err
}

// addHandler waits for the informer of gvk and adds the handler that
// pokes the sharder on a change of the shard labels.
func (s *Sharder) addHandler(ctx context.Context, gvk schema.GroupVersionKind) error {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	inf, err := s.Cache.GetInformer(ctx, obj, cache.BlockUntilSynced(true))
	if err != nil {
		return fmt.Errorf("watching %s: %w", gvk.Kind, err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { s.poke() },
		UpdateFunc: func(o, n any) {
			if ol, nl := labelsOf(o), labelsOf(n); ol[contract.LabelShard] != nl[contract.LabelShard] || ol[contract.LabelDrain] != nl[contract.LabelDrain] {
				s.poke()
			}
		},
	}); err != nil {
		return fmt.Errorf("watching %s: %w", gvk.Kind, err)
	}
	return nil
}

func labelsOf(o any) map[string]string {
	if m, ok := o.(metav1.Object); ok {
		return m.GetLabels()
	}
	return nil
}
