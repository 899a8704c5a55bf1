package sharding

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func leaseClient(t *testing.T) client.Client {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	return fake.NewClientBuilder().WithScheme(scheme).Build()
}

func member(c client.Client, id, identity string, renewDeadline time.Duration) *Member {
	return &Member{Client: c, Namespace: ns, Group: group, ID: id, Identity: identity,
		LeaseDuration: time.Minute, RenewDeadline: renewDeadline, RetryPeriod: time.Second}
}

func holder(t *testing.T, c client.Client, id string) string {
	l := &coordinationv1.Lease{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: LeaseName(group, id)}, l))
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

// TestMemberLapse: a replica holds its shard from its renewal until the
// renew deadline by its own clock, whatever the Lease says; past it (a
// pause) every write is refused and the next step stops the replica.
func TestMemberLapse(t *testing.T) {
	c := leaseClient(t)
	m := member(c, "s1", "s1_a", 3*time.Second)
	require.ErrorIs(t, m.Holds(), ErrNotHeld, "not held before the first renewal")
	require.NoError(t, m.step(context.Background(), logr.Discard()))
	require.NoError(t, m.Holds())
	assert.Equal(t, "s1_a", holder(t, c, "s1"))

	// No renewal, as in a SIGSTOP: the Lease still reads valid (a minute)
	// but the hold ends at the renew deadline.
	require.Eventually(t, func() bool { return m.Holds() != nil }, 30*time.Second, 10*time.Millisecond)
	err := m.Holds()
	require.ErrorIs(t, err, ErrNotHeld)
	assert.Regexp(t, `^shard s1: this replica does not hold its shard's lease: it was last renewed \S+ ago, past the renew deadline 3s$`, err.Error())
	err = m.step(context.Background(), logr.Discard())
	require.Error(t, err)
	assert.Regexp(t, `^shard s1 lost its lease: last renewed \S+ ago, past the renew deadline 3s; stopping, as its parents may have gone to other shards and what it had queued is stale$`, err.Error())
	assert.Error(t, m.Holds(), "still fenced after the failed step")
}

// TestMemberSameID: a second process with a shard id already held stands
// by, reconciling nothing (engine_shard_standby 1), until the first
// releases the Lease; the first, finding its Lease taken, stops.
func TestMemberSameID(t *testing.T) {
	c := leaseClient(t)
	ctx := context.Background()
	a, b := member(c, "dup", "dup_a", time.Minute), member(c, "dup", "dup_b", time.Minute)
	require.NoError(t, a.step(ctx, logr.Discard()))
	require.NoError(t, b.step(ctx, logr.Discard()))
	require.NoError(t, a.Holds())
	assert.EqualError(t, b.Holds(), "shard dup: this replica does not hold its shard's lease: dup_a holds it")
	assert.InDelta(t, 1, testutil.ToFloat64(metricStandby.WithLabelValues("dup")), 0)
	require.NoError(t, b.step(ctx, logr.Discard()), "standing by is not an error")
	assert.Equal(t, "dup_a", holder(t, c, "dup"))

	// a stops cleanly: the fence closes, the Lease is released, and b
	// takes it at its next step; the sharder still sees the shard alive.
	a.release(ctx)
	require.ErrorIs(t, a.Holds(), ErrNotHeld)
	live, err := liveShards(ctx, c, ns, group, time.Now())
	require.NoError(t, err)
	assert.Equal(t, []string{"dup"}, live)
	require.NoError(t, b.step(ctx, logr.Discard()))
	require.NoError(t, b.Holds())
	assert.Equal(t, "dup_b", holder(t, c, "dup"))
	assert.InDelta(t, 0, testutil.ToFloat64(metricStandby.WithLabelValues("dup")), 0)

	// A holder whose Lease another process took (its clock was off) stops.
	c2 := member(c, "dup", "dup_c", time.Minute)
	require.NoError(t, c2.step(ctx, logr.Discard()))
	l := &coordinationv1.Lease{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: LeaseName(group, "dup")}, l))
	l.Spec.HolderIdentity = ptr.To("dup_c")
	require.NoError(t, c.Update(ctx, l))
	assert.EqualError(t, b.step(ctx, logr.Discard()), "shard dup lost its lease to dup_c; stopping")
}

// TestSharderFenced: a sharder whose fence is closed writes no label.
func TestSharderFenced(t *testing.T) {
	f := newFixture(t, 10, "s1")
	f.s.Fence = func(context.Context) error { return errors.New("this replica does not hold the leader election lease") }
	assert.EqualError(t, f.s.pass(context.Background()), "not writing shard labels: this replica does not hold the leader election lease")
	shard, _ := f.labels()
	assert.Equal(t, map[string]int{"": 10}, count(shard), "no parent assigned")

	// Closed in the middle of a pass: the writes after it are refused.
	var calls atomic.Int32
	f.s.Fence = func(context.Context) error {
		if calls.Add(1) > 3 {
			return errors.New("lapsed")
		}
		return nil
	}
	require.Error(t, f.s.pass(context.Background()))
	shard, _ = f.labels()
	assert.Equal(t, 2, count(shard)["s1"], "two writes before the fence closed")
}

// TestLeadership: the sharder leads while the leader election Lease names
// it and it renewed the Lease within the renew deadline.
func TestLeadership(t *testing.T) {
	c := leaseClient(t)
	ctx := context.Background()
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "leader"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("me"), RenewTime: ptr.To(metav1.NewMicroTime(time.Now()))}}
	require.NoError(t, c.Create(ctx, lease))
	l := &Leadership{Leases: c, Namespace: ns, Name: "leader", Identity: "me", RenewDeadline: time.Minute}
	require.NoError(t, l.Holds(ctx))

	lease.Spec.HolderIdentity = ptr.To("other")
	require.NoError(t, c.Update(ctx, lease))
	require.NoError(t, l.Holds(ctx), "read again only once the last reading's hold is over")
	l.until = time.Time{}
	err := l.Holds(ctx)
	require.ErrorIs(t, err, ErrNotLeader)
	assert.EqualError(t, err, `this replica does not hold the leader election lease: "other" holds it`)

	lease.Spec.HolderIdentity = ptr.To("me")
	lease.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now().Add(-2 * time.Minute)))
	require.NoError(t, c.Update(ctx, lease))
	err = l.Holds(ctx)
	require.ErrorIs(t, err, ErrNotLeader)
	assert.Regexp(t, `^this replica does not hold the leader election lease: it was last renewed 2m0\.\d+s ago, past the renew deadline 1m0s$`, err.Error())
}
