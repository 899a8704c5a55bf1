package sharding

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrNotLeader is what Leadership.Holds returns, wrapped, when this process
// may not act as the leader.
var ErrNotLeader = errors.New("this replica does not hold the leader election lease")

// Leadership tells whether this process still holds the leader election
// Lease, as Member does for a shard: the Lease names it (Identity, the
// holder identity of its leader elector) and it renewed the Lease less
// than RenewDeadline ago, by its own clock (the renewal time in the Lease
// is the one it wrote). The manager's leader elector gives leadership up
// at RenewDeadline too, but a paused process learns that only after it
// runs again: this check is what a write made before it learns is fenced
// by. The Lease is read again once the last reading's hold is over.
type Leadership struct {
	Leases          client.Reader
	Namespace, Name string
	Identity        string
	RenewDeadline   time.Duration
	mu              sync.Mutex
	until           time.Time // wall clock, from the Lease
	monotonic       time.Time // until, by the monotonic clock
}

// Holds returns nil while this process leads, else an error wrapping
// ErrNotLeader or the reading's error.
func (l *Leadership) Holds(ctx context.Context) error {
	l.mu.Lock()
	ok := l.valid(time.Now())
	l.mu.Unlock()
	if ok {
		return nil
	}
	// Not under the lock: concurrent writers may read the Lease each,
	// once per renew deadline.
	lease := &coordinationv1.Lease{}
	if err := l.Leases.Get(ctx, client.ObjectKey{Namespace: l.Namespace, Name: l.Name}, lease); err != nil {
		return fmt.Errorf("reading the leader election lease: %w", err)
	}
	now := time.Now()
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	if holder != l.Identity {
		return fmt.Errorf("%w: %q holds it", ErrNotLeader, holder)
	}
	if lease.Spec.RenewTime == nil {
		return fmt.Errorf("%w: it has no renewal time", ErrNotLeader)
	}
	until := lease.Spec.RenewTime.Add(l.RenewDeadline)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.until = until
	// The monotonic end: what remains of the hold when it was read.
	l.monotonic = now.Add(until.Sub(now.Round(0)))
	if !l.valid(now) {
		return fmt.Errorf("%w: it was last renewed %s ago, past the renew deadline %s", ErrNotLeader, now.Sub(lease.Spec.RenewTime.Time).Round(time.Millisecond), l.RenewDeadline)
	}
	return nil
}

func (l *Leadership) valid(now time.Time) bool {
	return !l.until.IsZero() && now.Before(l.monotonic) && now.Round(0).Before(l.until)
}
