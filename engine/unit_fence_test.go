package engine

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/cuengine/engine/contract"
)

// testFence is a shard's lease the test opens and closes.
type testFence struct{ closed atomic.Bool }

func (f *testFence) Holds() error {
	if f.closed.Load() {
		return errors.New("shard s1: this replica does not hold its shard's lease")
	}
	return nil
}

// readerCache is a cache whose reads come from a fake client.
type readerCache struct {
	cache.Cache
	r client.Reader
}

func (c readerCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.r.Get(ctx, key, obj, opts...)
}

// The parents of the test are ConfigMaps, its children Secrets.
var fenceParentKind = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}

type fenceFixture struct {
	fence   *testFence
	cluster client.Client // what the apiserver holds
	shard   client.Client // the shard's cache of parents
	e       *Engine
	w       client.Client // the reconciler's fenced writer
}

func newFenceFixture(t *testing.T) *fenceFixture {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	f := &fenceFixture{fence: &testFence{}, cluster: fake.NewClientBuilder().WithScheme(scheme).Build(),
		shard: fake.NewClientBuilder().WithScheme(scheme).Build()}
	f.e = &Engine{opts: Options{Shard: "s1", Fence: f.fence}, parents: readerCache{r: f.shard}}
	f.w = f.e.fenced(f.cluster, fenceParentKind)
	for _, c := range []client.Client{f.cluster, f.shard} {
		require.NoError(t, c.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "p",
			Labels: map[string]string{contract.LabelShard: "s1"}}}))
	}
	return f
}

// writeAll makes one write of each kind for parent p, and returns their
// errors by name.
func (f *fenceFixture) writeAll(t *testing.T, name string) map[string]error {
	ctx := withFencedParent(context.Background(), types.NamespacedName{Namespace: "apps", Name: "p"})
	child := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name}}
	out := map[string]error{"create": f.w.Create(ctx, child)}
	if out["create"] != nil {
		require.NoError(t, f.cluster.Create(ctx, child))
	}
	patched := child.DeepCopy()
	patched.StringData = map[string]string{"k": "v"}
	out["patch"] = f.w.Patch(ctx, patched, client.MergeFrom(child))
	fresh := &corev1.Secret{}
	require.NoError(t, f.cluster.Get(ctx, client.ObjectKeyFromObject(child), fresh))
	out["update"] = f.w.Update(ctx, fresh)
	out["delete"] = f.w.Delete(ctx, fresh.DeepCopy())
	// The status of the parent, off the reconcile: the parent is the object.
	parent := &unstructured.Unstructured{}
	parent.SetGroupVersionKind(fenceParentKind)
	require.NoError(t, f.cluster.Get(ctx, types.NamespacedName{Namespace: "apps", Name: "p"}, parent))
	out["status"] = f.w.Status().Update(context.Background(), parent)
	return out
}

// TestFence: the reconciler's writes pass while the shard's lease is
// held and the parent is in the shard's cache; each is refused, with the
// reason, once the lease is lost or the parent assigned elsewhere, and
// nothing reaches the apiserver.
func TestFence(t *testing.T) {
	f := newFenceFixture(t)
	for op, err := range f.writeAll(t, "open") {
		if op != "status" { // the fake client has no status subresource for ConfigMaps
			assert.NoError(t, err, op)
		}
	}

	f.fence.closed.Store(true)
	for op, err := range f.writeAll(t, "closed") {
		require.ErrorIs(t, err, ErrFenced, op)
		assert.EqualError(t, err, "shard fence: shard s1: this replica does not hold its shard's lease", op)
	}
	secret := &corev1.Secret{}
	require.NoError(t, f.cluster.Get(context.Background(), types.NamespacedName{Namespace: "apps", Name: "closed"}, secret))
	assert.Empty(t, secret.StringData, "the fenced patch did not reach the apiserver")

	f.fence.closed.Store(false)
	cm := &corev1.ConfigMap{}
	require.NoError(t, f.shard.Get(context.Background(), types.NamespacedName{Namespace: "apps", Name: "p"}, cm))
	cm.Labels[contract.LabelShard] = "s2"
	require.NoError(t, f.shard.Update(context.Background(), cm))
	for op, err := range f.writeAll(t, "moved") {
		assert.EqualError(t, err, `shard fence: ConfigMap apps/p is assigned to shard "s2", not s1`, op)
	}

	require.NoError(t, f.shard.Delete(context.Background(), cm))
	for op, err := range f.writeAll(t, "gone") {
		assert.EqualError(t, err, "shard fence: ConfigMap apps/p is no longer assigned to shard s1", op)
	}
}

// TestFenceProvider: a provider call is refused as a write is.
func TestFenceProvider(t *testing.T) {
	f := newFenceFixture(t)
	kc := &kindController{e: f.e, gvk: fenceParentKind}
	ctx := withFencedParent(context.Background(), types.NamespacedName{Namespace: "apps", Name: "p"})
	require.NoError(t, kc.fenceProvider(ctx))
	f.fence.closed.Store(true)
	assert.EqualError(t, kc.fenceProvider(ctx), "shard fence: shard s1: this replica does not hold its shard's lease")
}

// countingReconciler counts its reconciles.
type countingReconciler struct{ n atomic.Int32 }

func (r *countingReconciler) Reconcile(context.Context, ctrl.Request) (ctrl.Result, error) {
	r.n.Add(1)
	return ctrl.Result{}, nil
}

// TestShardGateFenced: with the fence closed, a queued reconcile is
// requeued without running, and runs once the fence opens.
func TestShardGateFenced(t *testing.T) {
	f := newFenceFixture(t)
	next := &countingReconciler{}
	g := &shardGate{e: f.e, gvk: fenceParentKind, next: next}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "apps", Name: "p"}}

	f.fence.closed.Store(true)
	res, err := g.Reconcile(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, ctrl.Result{RequeueAfter: fencedRequeue}, res)
	assert.Zero(t, next.n.Load(), "not reconciled while fenced")

	f.fence.closed.Store(false)
	_, err = g.Reconcile(context.Background(), req)
	require.NoError(t, err)
	assert.EqualValues(t, 1, next.n.Load())
}
