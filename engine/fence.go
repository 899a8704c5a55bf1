package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/cuengine/engine/contract"
)

// Under sharding, every write the engine makes for a parent goes through
// the shard's fence: the replica must still hold its shard's Lease, by its
// own clock (Fence, sharding.Member), and the parent must still be
// assigned to its shard (in the shard's label-selected cache). Those
// writes are the children's applies and deletes, the parent's finalizer
// and status, and the providers' calls: the reconciler writes through
// fencedClient and calls providers after Engine.fence. The shard gate
// checks the fence before each reconcile too, and requeues the parent
// without reconciling it when it is closed, so work queued before a pause
// (SIGSTOP, a partition) is dropped, not written: the replica stops soon
// after (sharding.Member), and a replica standing by for its shard id
// reconciles nothing until it holds the shard.
//
// The check is made just before each request: a process paused between
// the check and the request still sends it. The fence narrows that to one
// request per worker, where a replica with no fence wrote everything it
// had queued.

// Fence is what the engine needs of its shard's Lease (sharding.Member).
type Fence interface {
	// Holds returns nil while this replica may write for its shard.
	Holds() error
}

// ErrFenced is returned, wrapped, by a write the shard's fence refused.
var ErrFenced = errors.New("shard fence")

var metricFenced = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "engine_shard_fenced_total",
	Help: "Reconciles and writes this replica did not make because it no longer held its shard's lease or the parent was no longer assigned to it, by what (reconcile, write, provider); under sharding only.",
}, []string{"what"})

func init() {
	metrics.Registry.MustRegister(metricFenced)
	for _, w := range []string{"reconcile", "write", "provider"} {
		metricFenced.WithLabelValues(w)
	}
}

// fenceParentKey is the context key of the parent a reconcile writes for.
type fenceParentKey struct{}

// withFencedParent records in ctx the parent whose reconcile it serves.
func withFencedParent(ctx context.Context, key types.NamespacedName) context.Context {
	return context.WithValue(ctx, fenceParentKey{}, key)
}

// fence returns nil when this replica may write for the parent of kind
// gvk named by ctx (a reconcile's) or, failing that, by obj (the parent
// itself: its status, written off the reconcile); else an error wrapping
// ErrFenced. Without sharding it always returns nil.
func (e *Engine) fence(ctx context.Context, gvk schema.GroupVersionKind, obj client.Object) error {
	if e.opts.Fence == nil {
		return nil
	}
	if err := e.opts.Fence.Holds(); err != nil {
		return fmt.Errorf("%w: %w", ErrFenced, err)
	}
	key, ok := ctx.Value(fenceParentKey{}).(types.NamespacedName)
	if !ok {
		if obj == nil || obj.GetObjectKind().GroupVersionKind() != gvk {
			return nil
		}
		key = client.ObjectKeyFromObject(obj)
	}
	parent := &unstructured.Unstructured{}
	parent.SetGroupVersionKind(gvk)
	err := e.parents.Get(ctx, key, parent)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: %s %s is no longer assigned to shard %s", ErrFenced, gvk.Kind, key, e.opts.Shard)
	}
	if err != nil {
		return fmt.Errorf("%w: reading %s %s: %w", ErrFenced, gvk.Kind, key, err)
	}
	if s := parent.GetLabels()[contract.LabelShard]; s != e.opts.Shard {
		return fmt.Errorf("%w: %s %s is assigned to shard %q, not %s", ErrFenced, gvk.Kind, key, s, e.opts.Shard)
	}
	return nil
}

// fencedClient is a client whose every write for a parent of kind gvk is
// checked by the shard's fence first.
type fencedClient struct {
	client.Client
	e   *Engine
	gvk schema.GroupVersionKind
}

// fenced returns c fenced for kind gvk under sharding, else c.
func (e *Engine) fenced(c client.Client, gvk schema.GroupVersionKind) client.Client {
	if e.opts.Fence == nil {
		return c
	}
	return &fencedClient{Client: c, e: e, gvk: gvk}
}

func (c *fencedClient) check(ctx context.Context, obj client.Object) error {
	if err := c.e.fence(ctx, c.gvk, obj); err != nil {
		metricFenced.WithLabelValues("write").Inc()
		return err
	}
	return nil
}

func (c *fencedClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := c.check(ctx, obj); err != nil {
		return err
	}
	return c.Client.Create(ctx, obj, opts...)
}

func (c *fencedClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if err := c.check(ctx, obj); err != nil {
		return err
	}
	return c.Client.Update(ctx, obj, opts...)
}

func (c *fencedClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := c.check(ctx, obj); err != nil {
		return err
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *fencedClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if err := c.check(ctx, nil); err != nil {
		return err
	}
	return c.Client.Apply(ctx, obj, opts...)
}

func (c *fencedClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if err := c.check(ctx, obj); err != nil {
		return err
	}
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *fencedClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	if err := c.check(ctx, obj); err != nil {
		return err
	}
	return c.Client.DeleteAllOf(ctx, obj, opts...)
}

func (c *fencedClient) Status() client.SubResourceWriter {
	return &fencedSubResource{SubResourceClient: c.Client.SubResource("status"), c: c}
}

func (c *fencedClient) SubResource(name string) client.SubResourceClient {
	return &fencedSubResource{SubResourceClient: c.Client.SubResource(name), c: c}
}

// fencedSubResource is a subresource client of a fencedClient.
type fencedSubResource struct {
	client.SubResourceClient
	c *fencedClient
}

func (s *fencedSubResource) Create(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
	if err := s.c.check(ctx, obj); err != nil {
		return err
	}
	return s.SubResourceClient.Create(ctx, obj, sub, opts...)
}

func (s *fencedSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if err := s.c.check(ctx, obj); err != nil {
		return err
	}
	return s.SubResourceClient.Update(ctx, obj, opts...)
}

func (s *fencedSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if err := s.c.check(ctx, obj); err != nil {
		return err
	}
	return s.SubResourceClient.Patch(ctx, obj, patch, opts...)
}

func (s *fencedSubResource) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	if err := s.c.check(ctx, nil); err != nil {
		return err
	}
	return s.SubResourceClient.Apply(ctx, obj, opts...)
}
