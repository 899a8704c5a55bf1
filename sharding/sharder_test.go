package sharding

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"

	"github.com/cuengine/engine/contract"
)

// fakeParents is the fake client standing in for the manager's cache.
type fakeParents struct{ client.Client }

func (fakeParents) GetInformer(context.Context, client.Object, ...cache.InformerGetOption) (cache.Informer, error) {
	return &controllertest.FakeInformer{}, nil
}

const ns, group = "engine-system", "engine-test"

// The parents of the test are ConfigMaps: any kind does, the sharder reads
// only metadata.
var parentKind = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}

type fixture struct {
	t *testing.T
	c client.Client
	s *Sharder
}

func newFixture(t *testing.T, parents int, shards ...string) *fixture {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	f := &fixture{t: t, c: c, s: &Sharder{Client: c, Cache: fakeParents{c}, Leases: c, Namespace: ns, Group: group,
		Kinds: func() []schema.GroupVersionKind { return []schema.GroupVersionKind{parentKind} }, Every: time.Second}}
	f.s.watching = map[schema.GroupVersionKind]*kindWatch{}
	f.s.wake = make(chan struct{}, 1)
	for _, id := range shards {
		f.lease(id, time.Now())
	}
	for i := range parents {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: fmt.Sprintf("p%03d", i), UID: types.UID(fmt.Sprintf("uid-%03d", i))}}
		require.NoError(t, c.Create(context.Background(), cm))
	}
	return f
}

// leaseSeconds is the test Leases' duration: longer than any test runs
// (with -race on a loaded machine the handover takes seconds), so only
// the Leases the tests renew in the past (expiredAt) expire.
const leaseSeconds = 600

// expiredAt is a renewal time whose Lease has expired.
func expiredAt() time.Time { return time.Now().Add(-2 * leaseSeconds * time.Second) }

// lease creates or renews a shard's Lease as renewed at renewed.
func (f *fixture) lease(id string, renewed time.Time) {
	l := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: ns, Name: LeaseName(group, id)}
	err := f.c.Get(context.Background(), key, l)
	l.Name, l.Namespace, l.Labels = key.Name, key.Namespace, map[string]string{contract.LabelShardGroup: group}
	l.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr.To(id), LeaseDurationSeconds: ptr.To(int32(leaseSeconds)), RenewTime: ptr.To(metav1.NewMicroTime(renewed))}
	if err == nil {
		require.NoError(f.t, f.c.Update(context.Background(), l))
		return
	}
	require.NoError(f.t, f.c.Create(context.Background(), l))
}

// labels returns each parent's shard and drain labels by name.
func (f *fixture) labels() (shard, drain map[string]string) {
	list := &corev1.ConfigMapList{}
	require.NoError(f.t, f.c.List(context.Background(), list))
	shard, drain = map[string]string{}, map[string]string{}
	for _, cm := range list.Items {
		shard[cm.Name] = cm.Labels[contract.LabelShard]
		drain[cm.Name] = cm.Labels[contract.LabelDrain]
	}
	return shard, drain
}

func (f *fixture) pass() {
	require.NoError(f.t, f.s.pass(context.Background()))
}

// release does what a shard does with a draining parent it holds.
func (f *fixture) release(name string) {
	cm := &corev1.ConfigMap{}
	require.NoError(f.t, f.c.Get(context.Background(), client.ObjectKey{Namespace: "apps", Name: name}, cm))
	delete(cm.Labels, contract.LabelShard)
	delete(cm.Labels, contract.LabelDrain)
	require.NoError(f.t, f.c.Update(context.Background(), cm))
}

func count(m map[string]string) map[string]int {
	out := map[string]int{}
	for _, v := range m {
		out[v]++
	}
	return out
}

// TestSharderHandover walks the assignment state machine: new parents are
// assigned; a joining shard gets its share only after the old shard
// released each one; a shard whose lease expired loses its parents at once.
func TestSharderHandover(t *testing.T) {
	f := newFixture(t, 90, "a", "b", "c")
	f.pass()
	shard, drain := f.labels()
	for name, s := range shard {
		assert.Contains(t, []string{"a", "b", "c"}, s, "%s is assigned", name)
		assert.Empty(t, drain[name])
	}
	for s, n := range count(shard) {
		assert.True(t, n >= 18 && n <= 45, "shard %s holds %d of 90", s, n)
	}
	f.pass()
	again, _ := f.labels()
	assert.Equal(t, shard, again, "a pass with nothing changed writes nothing")

	// A fourth shard joins: its parents are first drained, still on their shard.
	f.lease("d", time.Now())
	f.pass()
	afterJoin, drain := f.labels()
	assert.Equal(t, shard, afterJoin, "no parent changes shard before its shard releases it")
	var draining []string
	for name, d := range drain {
		if d != "" {
			draining = append(draining, name)
		}
	}
	assert.NotEmpty(t, draining, "parents of the new shard are draining")
	assert.Less(t, len(draining), 45, "about a quarter move, not half")
	f.pass()
	_, drainAgain := f.labels()
	assert.Equal(t, drain, drainAgain, "waiting for the release writes nothing")

	// Their shard releases half of them: those, and only those, go to d.
	released := map[string]bool{}
	for _, name := range draining[:len(draining)/2+1] {
		f.release(name)
		released[name] = true
	}
	f.pass()
	moved, drain := f.labels()
	for _, name := range draining {
		if released[name] {
			assert.Equal(t, "d", moved[name], "%s released goes to the new shard", name)
			assert.Empty(t, drain[name])
		} else {
			assert.Equal(t, shard[name], moved[name], "%s not yet released stays", name)
			assert.Equal(t, "true", drain[name])
		}
	}

	// Shard b dies (its lease is not renewed): its parents, draining or
	// not, go straight to the live shards, none to b.
	f.lease("b", expiredAt())
	f.pass()
	final, drain := f.labels()
	for name, s := range final {
		assert.NotEqual(t, "b", s, "%s left the dead shard", name)
		if moved[name] == "b" {
			assert.Empty(t, drain[name], "%s reassigned without a drain", name)
		}
		if moved[name] != "b" && moved[name] != s {
			assert.Equal(t, "true", drain[name], "%s of a live shard moves only through a drain", name)
		}
	}
}

// barrierClient holds every Patch until want of them are in flight at
// once, and records the most in flight; after a bound it lets them fail.
type barrierClient struct {
	client.Client
	want    int
	timeout context.Context

	mu             sync.Mutex
	inFlight, most int
	all            chan struct{}
	release        sync.Once
}

func (b *barrierClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	b.mu.Lock()
	b.inFlight++
	b.most = max(b.most, b.inFlight)
	if b.inFlight == b.want {
		b.release.Do(func() { close(b.all) })
	}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.inFlight--
	}()
	select {
	case <-b.all:
		return b.Client.Patch(ctx, obj, patch, opts...)
	case <-b.timeout.Done():
		return fmt.Errorf("only %d writes in flight at once, want %d", b.most, b.want)
	}
}

// TestSharderWritesConcurrently: a pass has passWriters label writes in
// flight at once, and no more.
func TestSharderWritesConcurrently(t *testing.T) {
	f := newFixture(t, 3*passWriters, "a", "b")
	timeout, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	barrier := &barrierClient{Client: f.c, want: passWriters, timeout: timeout, all: make(chan struct{})}
	f.s.Client = barrier
	f.pass()
	assert.Equal(t, passWriters, barrier.most, "writes in flight at most")
	shard, _ := f.labels()
	assert.Zero(t, count(shard)[""], "every parent assigned")
}

func TestSharderNoShards(t *testing.T) {
	f := newFixture(t, 5)
	f.pass()
	shard, _ := f.labels()
	assert.Equal(t, map[string]int{"": 5}, count(shard), "no live shard: nothing assigned")
	f.lease("a", expiredAt())
	f.pass()
	shard, _ = f.labels()
	assert.Equal(t, map[string]int{"": 5}, count(shard), "an expired lease is no shard")
}

func TestDecide(t *testing.T) {
	ring := NewRing([]string{"a", "b"})
	alive := map[string]bool{"a": true, "b": true}
	var uidA, uidB string
	for i := 0; uidA == "" || uidB == ""; i++ {
		uid := fmt.Sprintf("uid-%d", i)
		if ring.Get(uid) == "a" {
			uidA = uid
		} else {
			uidB = uid
		}
	}
	for _, tt := range []struct {
		name   string
		labels map[string]string
		uid    string
		act    action
		shard  string
	}{
		{"new", nil, uidA, actAssign, "a"},
		{"home", map[string]string{contract.LabelShard: "a"}, uidA, actNone, ""},
		{"on the wrong live shard", map[string]string{contract.LabelShard: "b"}, uidA, actDrain, "b"},
		{"draining", map[string]string{contract.LabelShard: "b", contract.LabelDrain: "true"}, uidA, actNone, ""},
		{"draining back home", map[string]string{contract.LabelShard: "a", contract.LabelDrain: "true"}, uidA, actNone, ""},
		{"on a dead shard", map[string]string{contract.LabelShard: "gone"}, uidB, actReassign, "b"},
		{"draining on a dead shard", map[string]string{contract.LabelShard: "gone", contract.LabelDrain: "true"}, uidB, actReassign, "b"},
		{"released", map[string]string{contract.LabelDrain: "true"}, uidB, actAssign, "b"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			act, shard := decide(tt.labels, tt.uid, alive, ring)
			assert.Equal(t, tt.act, act)
			assert.Equal(t, tt.shard, shard)
		})
	}
	act, _ := decide(nil, uidA, nil, NewRing(nil))
	assert.Equal(t, actNone, act, "no shard: no write")
}

// slowParents starts the informer of slowKind only when release is closed,
// as a first LIST of a large kind does; the others start at once.
type slowParents struct {
	fakeParents
	entered chan struct{}
	release chan struct{}
}

var slowKind = schema.GroupVersionKind{Version: "v1", Kind: "Secret"}

func (p slowParents) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	if obj.GetObjectKind().GroupVersionKind() == slowKind {
		close(p.entered)
		select {
		case <-p.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return p.fakeParents.GetInformer(ctx, obj, opts...)
}

// TestSharderWatchHoldsNoLock: while one kind's informer makes its first
// LIST, the sharder registers another kind (s.mu is not held across it).
func TestSharderWatchHoldsNoLock(t *testing.T) {
	f := newFixture(t, 0)
	slow := slowParents{fakeParents: fakeParents{f.c}, entered: make(chan struct{}), release: make(chan struct{})}
	f.s.Cache = slow
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	slowDone := make(chan error, 1)
	go func() { slowDone <- f.s.watch(ctx, slowKind) }()
	select {
	case <-slow.entered:
	case <-ctx.Done():
		t.Fatal("the slow informer was never asked for")
	}

	fastDone := make(chan error, 1)
	go func() { fastDone <- f.s.watch(ctx, parentKind) }()
	select {
	case err := <-fastDone:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		close(slow.release)
		t.Fatal("registering a kind waited for another kind's first LIST")
	}

	// A second caller for the slow kind waits for the first one, and
	// returns when its own context ends.
	short, stop := context.WithCancel(ctx)
	stop()
	require.ErrorIs(t, f.s.watch(short, slowKind), context.Canceled)

	close(slow.release)
	require.NoError(t, <-slowDone)
	require.NoError(t, f.s.watch(ctx, slowKind))
}
