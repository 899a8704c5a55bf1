package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultClusterCallTimeout bounds each request the engine sends a
// workload cluster's apiserver (Options.ClusterCallTimeout): a cluster
// that accepts connections and never answers holds a kind's worker for
// at most this long, once, and is then reported down to every parent
// until its probe sees it answer again.
const DefaultClusterCallTimeout = 3 * time.Second

// boundedClient is a workload cluster's client whose every call to the
// apiserver ends within timeout; a call that does not, while its caller
// still waits, marks the cluster down (unanswered), so that the next
// reconciles are told so at once instead of each waiting out its own
// deadline. Reads from the cluster's cache are bounded too, harmlessly:
// they do not wait on the network.
type boundedClient struct {
	client.Client
	timeout    time.Duration
	unanswered func(error)
}

// bound runs call under the deadline and reports a call that ran into it.
func (b boundedClient) bound(ctx context.Context, call func(ctx context.Context) error) error {
	cctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	err := call(cctx)
	if err != nil && ctx.Err() == nil && timedOut(err) {
		err = fmt.Errorf("no answer within %s (the engine's bound on a call to a workload cluster): %w", b.timeout, err)
		b.unanswered(err)
	}
	return err
}

// timedOut reports whether err is a deadline that passed: the context's,
// or the HTTP client's or the connection's own.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

func (b boundedClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return b.bound(ctx, func(ctx context.Context) error { return b.Client.Get(ctx, key, obj, opts...) })
}

func (b boundedClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return b.bound(ctx, func(ctx context.Context) error { return b.Client.List(ctx, list, opts...) })
}

func (b boundedClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	return b.bound(ctx, func(ctx context.Context) error { return b.Client.Apply(ctx, obj, opts...) })
}

func (b boundedClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return b.bound(ctx, func(ctx context.Context) error { return b.Client.Create(ctx, obj, opts...) })
}

func (b boundedClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	return b.bound(ctx, func(ctx context.Context) error { return b.Client.Delete(ctx, obj, opts...) })
}

func (b boundedClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return b.bound(ctx, func(ctx context.Context) error { return b.Client.Update(ctx, obj, opts...) })
}

func (b boundedClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return b.bound(ctx, func(ctx context.Context) error { return b.Client.Patch(ctx, obj, patch, opts...) })
}

func (b boundedClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	return b.bound(ctx, func(ctx context.Context) error { return b.Client.DeleteAllOf(ctx, obj, opts...) })
}

// Status and SubResource are not bounded: the engine writes no
// subresource of a child (its status is the child's controller's).
var _ client.Client = boundedClient{}

// boundedReader is the cluster's apiserver reader under the same bound.
type boundedReader struct {
	client.Reader
	b boundedClient
}

func (r boundedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return r.b.bound(ctx, func(ctx context.Context) error { return r.Reader.Get(ctx, key, obj, opts...) })
}

func (r boundedReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return r.b.bound(ctx, func(ctx context.Context) error { return r.Reader.List(ctx, list, opts...) })
}
