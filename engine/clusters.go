package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cuengine/engine/clusters"
	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/reconciler"
)

// remoteWatchTimeout bounds the wait for a workload cluster's cache to
// hold a kind: a cluster that answers its probe but not the list is
// reported unreachable rather than holding a worker.
const remoteWatchTimeout = 30 * time.Second

// workloadClusters runs the registry of workload clusters while a
// template may put children in one (policy.clusters), and stops it when
// none does: with it go every cache and watch in those clusters. Its lock
// guards its fields only; the registry starts and stops outside it.
type workloadClusters struct {
	e    *Engine
	src  clusters.Source
	wake chan struct{}
	// requeue wakes the one loop that requeues the parents after a
	// cluster changed (requeueLoop): the registry never waits for it.
	requeue chan struct{}

	mu      sync.Mutex
	reg     *clusters.Registry // nil while not running
	watched map[remoteWatch]bool
	indexes map[remoteIndex]*indexing
}

// remoteIndex is the parent-uid index of one kind in one cluster's cache
// (as started), shared by every parent kind that puts children there.
type remoteIndex struct {
	cluster cluster.Cluster
	gvk     schema.GroupVersionKind
}

// indexing is the registration of one remoteIndex: done is closed once it
// is over, err set before.
type indexing struct {
	done chan struct{}
	err  error
}

// remoteWatch is one kind watched in one cluster (as started: a cluster
// restarted with a new registration is a new one) for one parent kind.
type remoteWatch struct {
	cluster     cluster.Cluster
	parent, gvk schema.GroupVersionKind
}

func newWorkloadClusters(e *Engine, src clusters.Source) *workloadClusters {
	return &workloadClusters{e: e, src: src, wake: make(chan struct{}, 1), requeue: make(chan struct{}, 1), watched: map[remoteWatch]bool{}, indexes: map[remoteIndex]*indexing{}}
}

// changed wakes run to look again at whether the registry is needed.
func (w *workloadClusters) changed() { kick(w.wake) }

func kick(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// requeueLoop requeues the parents that may have children in workload
// clusters each time a cluster was added, removed, came up or went down,
// one requeue at a time, until ctx ends.
func (w *workloadClusters) requeueLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.requeue:
		}
		w.e.requeueClusterParents(ctx)
	}
}

// run starts and stops the registry as the templates need it, until ctx
// ends; it returns once the registry it started has stopped.
func (w *workloadClusters) run(ctx context.Context) {
	var loops sync.WaitGroup
	defer loops.Wait()
	loops.Go(func() { w.requeueLoop(ctx) })
	var stop context.CancelFunc
	var done chan struct{}
	halt := func() {
		if stop == nil {
			return
		}
		stop()
		<-done
		stop, done = nil, nil
		w.mu.Lock()
		w.reg, w.watched, w.indexes = nil, map[remoteWatch]bool{}, map[remoteIndex]*indexing{}
		w.mu.Unlock()
	}
	defer halt()
	for {
		needed := w.e.needsClusters()
		switch {
		case needed && stop == nil:
			reg := clusters.New(clusters.Options{
				Cluster:    w.clusterOptions,
				ProbeEvery: w.e.opts.ClusterProbeEvery,
				OnChange:   func(string) { kick(w.requeue) },
				Logger:     log.FromContext(ctx).WithName("clusters"),
			})
			rctx, cancel := context.WithCancel(ctx)
			stop, done = cancel, make(chan struct{})
			w.mu.Lock()
			w.reg = reg
			w.mu.Unlock()
			go func() {
				defer close(done)
				if err := reg.Run(rctx, w.src); err != nil {
					log.FromContext(ctx).Error(err, "the cluster registrations cannot be read; workload clusters are reported unknown")
				}
			}()
			log.FromContext(ctx).Info("a template puts children in workload clusters: registering them")
		case !needed && stop != nil:
			halt()
			log.FromContext(ctx).Info("no template puts children in workload clusters: their caches are stopped")
		}
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		}
	}
}

// clusterOptions: a workload cluster's cache holds only the engine's
// children, without their managed fields, and unstructured reads come
// from it.
func (w *workloadClusters) clusterOptions(o *cluster.Options) {
	o.Scheme = w.e.mgr.GetScheme()
	o.Cache.DefaultLabelSelector = labels.SelectorFromSet(labels.Set{contract.LabelManagedBy: contract.ManagedByValue})
	o.Cache.DefaultTransform = cache.TransformStripManagedFields()
	o.Client.Cache = &client.CacheOptions{Unstructured: true}
	o.MapperProvider = boundedMapper(w.e.opts.ClusterCallTimeout)
}

// boundedMapper is a workload cluster's REST mapper, whose discovery
// requests end within the call bound: a kind the mapper has not seen is
// looked up lazily inside a client call, and the lookup takes no context,
// so without a timeout of its own it would wait on a cluster that hangs
// past the boundedClient's deadline. The mapper has a copy of the
// cluster's HTTP client with the timeout; the cache's watches keep the
// client without one.
func boundedMapper(timeout time.Duration) func(*rest.Config, *http.Client) (meta.RESTMapper, error) {
	return func(cfg *rest.Config, hc *http.Client) (meta.RESTMapper, error) {
		bounded := *hc
		bounded.Timeout = timeout
		return NewRESTMapper(cfg, &bounded)
	}
}

// ClusterRegistrationsUnreadable says why the cluster registrations
// cannot be read, "" when they can (or no template needs them).
func (e *Engine) ClusterRegistrationsUnreadable() string {
	if e.workload == nil {
		return ""
	}
	w := e.workload
	w.mu.Lock()
	reg := w.reg
	w.mu.Unlock()
	if reg == nil {
		return ""
	}
	return reg.Unreadable()
}

// ClusterStatus lists the registered workload clusters, nil while no
// template needs any (or the engine serves none).
func (e *Engine) ClusterStatus() []clusters.Status {
	if e.workload == nil {
		return nil
	}
	w := e.workload
	w.mu.Lock()
	reg := w.reg
	w.mu.Unlock()
	if reg == nil {
		return nil
	}
	return reg.Status()
}

// forKind is the reconciler.Clusters of one parent kind: events in the
// workload clusters requeue its parents.
func (w *workloadClusters) forKind(kc *kindController) reconciler.Clusters {
	if w == nil {
		return nil
	}
	return kindClusters{w: w, kc: kc}
}

type kindClusters struct {
	w  *workloadClusters
	kc *kindController
}

// Cluster implements reconciler.Clusters.
func (k kindClusters) Cluster(_ context.Context, name string) (reconciler.RemoteCluster, error) {
	k.w.mu.Lock()
	reg := k.w.reg
	k.w.mu.Unlock()
	if reg == nil {
		return nil, &reconciler.ClusterError{Cluster: name, Unknown: true, Err: fmt.Errorf("cluster %q is not registered: the engine registers workload clusters only while a template's policy.clusters allows one", name)}
	}
	cl, err := reg.Get(name)
	var unknown *clusters.UnknownError
	switch {
	case errors.As(err, &unknown):
		return nil, &reconciler.ClusterError{Cluster: name, Unknown: true, Err: err}
	case err != nil:
		return nil, &reconciler.ClusterError{Cluster: name, Err: err}
	}
	b := boundedClient{Client: cl.GetClient(), timeout: k.w.e.opts.ClusterCallTimeout, unanswered: func(err error) { reg.Unanswered(name, err) }}
	return remoteCluster{Client: b, live: boundedReader{Reader: cl.GetAPIReader(), b: b}, cl: cl, k: k}, nil
}

// remoteCluster implements reconciler.RemoteCluster on a registered
// cluster.
type remoteCluster struct {
	client.Client // a boundedClient
	live          client.Reader
	cl            cluster.Cluster
	k             kindClusters
}

func (r remoteCluster) Live() client.Reader { return r.live }

// ListChildren implements reconciler.RemoteCluster by the cache's
// parent-uid index, as for local children: without it, a List by label
// reads every child of the kind in the cluster.
func (r remoteCluster) ListChildren(ctx context.Context, list *unstructured.UnstructuredList, parentUID string) error {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(list.GroupVersionKind().GroupVersion().WithKind(strings.TrimSuffix(list.GetKind(), "List")))
	return listByParentUID(ctx, r.cl.GetCache(), obj, list, parentUID, false) // parentindex.go
}

// index registers, once per cluster and kind, the parent-uid index of the
// cluster's cache; a caller that finds it under way waits for it, so that
// no List asks for an index not there yet. Registering it starts the
// kind's informer and waits until it has synced.
func (r remoteCluster) index(ctx context.Context, obj *unstructured.Unstructured) error {
	key := remoteIndex{cluster: r.cl, gvk: obj.GroupVersionKind()}
	w := r.k.w
	w.mu.Lock()
	ix, found := w.indexes[key]
	if !found {
		ix = &indexing{done: make(chan struct{})}
		w.indexes[key] = ix
	}
	w.mu.Unlock()
	if found {
		select {
		case <-ix.done:
			return ix.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	ix.err = addParentUIDIndex(ctx, r.cl.GetCache(), obj) // parentindex.go
	if ix.err != nil {
		w.mu.Lock()
		delete(w.indexes, key) // the next reconcile tries again
		w.mu.Unlock()
	}
	close(ix.done)
	return ix.err
}

// Watch adds, once per cluster, parent kind and child kind, a handler on
// the cluster's informer that requeues the parent an event's child names
// (its parent annotation, as for local children).
func (r remoteCluster) Watch(ctx context.Context, gvk schema.GroupVersionKind) error {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	wctx, cancel := context.WithTimeout(ctx, remoteWatchTimeout)
	defer cancel()
	// First the index, which every caller waits for: ListChildren
	// follows.
	if err := r.index(wctx, obj); err != nil {
		return err
	}
	key := remoteWatch{cluster: r.cl, parent: r.k.kc.gvk, gvk: gvk}
	r.k.w.mu.Lock()
	done := r.k.w.watched[key]
	r.k.w.watched[key] = true // claimed: added below, outside the lock
	r.k.w.mu.Unlock()
	if done {
		return nil
	}
	unclaim := func() {
		r.k.w.mu.Lock()
		delete(r.k.w.watched, key)
		r.k.w.mu.Unlock()
	}
	inf, err := r.cl.GetCache().GetInformer(wctx, obj)
	if err != nil {
		unclaim()
		return err
	}
	kc := r.k.kc
	enqueue := func(o any) {
		if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			o = t.Obj
		}
		if child, ok := o.(client.Object); ok {
			// The handler outlives this reconcile: no request context.
			for _, req := range kc.parentOf(context.Background(), child) {
				kc.enqueueRequest(req.NamespacedName)
			}
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, n any) { enqueue(n) },
		DeleteFunc: enqueue,
	}); err != nil {
		unclaim()
		return err
	}
	return nil
}

// needsClusters reports whether a template served (or retired, whose
// parents' deletions are still finished) may put children in a workload
// cluster.
func (e *Engine) needsClusters() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, kc := range e.kinds {
		if kc.Template().Policy.Clusters.Any() {
			return true
		}
	}
	return false
}

// requeueClusterParents requeues the parents of every kind that may have
// children in workload clusters, after a cluster was added, removed, came
// up or went down: they converge within seconds of its return.
func (e *Engine) requeueClusterParents(ctx context.Context) {
	e.mu.Lock()
	var kinds []*kindController
	for _, kc := range e.kinds {
		if kc.Template().Policy.Clusters.Any() {
			kinds = append(kinds, kc)
		}
	}
	e.mu.Unlock()
	for _, kc := range kinds {
		kc.RequeueAll(ctx)
	}
}
