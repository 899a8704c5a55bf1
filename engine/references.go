package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

// The objects the templates reference are held once for the whole engine,
// and only those the parents read: one informer per distinct placed
// reference (refKey), started by the first reconcile that reads it and
// stopped when no parent holds it any more (a parent deleted, its template
// edited, its kind removed). A reference by name watches that one object
// (a field selector metadata.name=<name> in its namespace), as the kubelet
// watches the Secrets and ConfigMaps of its pods; a reference by selector
// watches the objects of its namespace the selector matches (a label
// selector). Two templates, or two parents, reading the same objects share
// the informer. An event on an informer's objects requeues every parent
// holding its key (refindex.go): the informer holds nothing else. The
// engine only ever reads these objects.

// referenceSyncTimeout bounds how long a reconcile waits for a new
// informer's first list.
const referenceSyncTimeout = 30 * time.Second

// referenceCache is the engine's one cache of referenced objects.
type referenceCache struct {
	dynamic dynamic.Interface
	mapper  meta.RESTMapper
	// live reads a reference no parent holds (the rollout's hold check).
	live client.Reader
	// namespace restricts the engine to one namespace; "" is none.
	namespace string

	mu        sync.Mutex
	ctx       context.Context // the engine's; nil until it starts
	index     *refIndex
	informers map[refKey]*refInformer
}

// refInformer watches the objects of one key.
type refInformer struct {
	key    refKey
	store  toolscache.Store
	synced toolscache.DoneChecker
	stop   context.CancelFunc
	done   <-chan struct{} // closed once stopped

	mu      sync.Mutex
	listErr error         // the last failed list or watch, until synced
	failed  chan struct{} // closed on the first failure
}

func newReferenceCache(dc dynamic.Interface, mapper meta.RESTMapper, live client.Reader, namespace string) *referenceCache {
	return &referenceCache{dynamic: dc, mapper: mapper, live: live, namespace: namespace, index: newRefIndex(), informers: map[refKey]*refInformer{}}
}

// start lets informers run until ctx ends.
func (c *referenceCache) start(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ctx = ctx
}

// track replaces what the parent holds, and stops the informers no parent
// holds any more. Nothing is watched until the parent reads (read). A
// closed kind's parents hold nothing.
func (c *referenceCache) track(h refHolder, refs []templates.Reference) {
	keys := make([]refKey, 0, len(refs))
	for _, ref := range refs {
		keys = append(keys, keyOf(ref))
	}
	c.mu.Lock()
	if h.kc.refsClosed.Load() {
		keys = nil
	}
	released := c.index.track(h, keys)
	stopped := c.dropLocked(released)
	c.mu.Unlock()
	stopAll(stopped)
}

// releaseKind closes the kind: its parents hold nothing from now on,
// until reopened (kindController.update).
func (c *referenceCache) releaseKind(kc *kindController) {
	kc.refsClosed.Store(true)
	c.mu.Lock()
	stopped := c.dropLocked(c.index.releaseKind(kc))
	c.mu.Unlock()
	stopAll(stopped)
}

// dropLocked removes the informers of the keys released; the caller
// stops them once the lock is released.
func (c *referenceCache) dropLocked(released []refKey) []*refInformer {
	var out []*refInformer
	for _, k := range released {
		if inf := c.informers[k]; inf != nil {
			delete(c.informers, k)
			out = append(out, inf)
		}
	}
	return out
}

func stopAll(infs []*refInformer) {
	for _, inf := range infs {
		inf.stop()
	}
}

// read returns the objects a placed reference reaches: from its informer,
// started if a parent holds the reference and none runs yet, and waited
// for until it has listed; from the apiserver when no parent holds it.
// The objects are copies.
func (c *referenceCache) read(ctx context.Context, ref templates.Reference) ([]*unstructured.Unstructured, error) {
	key := keyOf(ref)
	if c.namespace != "" && key.namespace != "" && key.namespace != c.namespace {
		return nil, fmt.Errorf("cannot read %s: the engine watches only namespace %q", key, c.namespace)
	}
	inf, err := c.informer(key)
	if err != nil {
		return nil, err
	}
	if inf == nil {
		return render.LiveReader{Reader: c.live}.Read(ctx, ref)
	}
	if err := inf.wait(ctx); err != nil {
		return nil, err
	}
	items := inf.store.List()
	out := make([]*unstructured.Unstructured, 0, len(items))
	for _, item := range items {
		u, ok := item.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		u = u.DeepCopy()
		u.SetGroupVersionKind(ref.GVK)
		out = append(out, u)
	}
	return out, nil
}

// informer returns the key's informer, started if a parent holds the key;
// nil if none does.
func (c *referenceCache) informer(key refKey) (*refInformer, error) {
	c.mu.Lock()
	inf, held, ctx := c.informers[key], c.index.held(key), c.ctx
	c.mu.Unlock()
	if inf != nil || !held {
		return inf, nil
	}
	if ctx == nil {
		return nil, errors.New("the reference cache is not running")
	}
	mapping, err := c.mapper.RESTMapping(key.gvk.GroupKind(), key.gvk.Version) // may ask the apiserver: no lock held
	if err != nil {
		return nil, fmt.Errorf("watching %s: %w", key, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if inf := c.informers[key]; inf != nil || !c.index.held(key) {
		return inf, nil // started meanwhile, or let go
	}
	inf = c.newInformer(ctx, key, mapping)
	c.informers[key] = inf
	return inf, nil
}

// newInformer builds and runs the key's informer; its event handler
// requeues the key's holders. It does no I/O itself.
func (c *referenceCache) newInformer(parent context.Context, key refKey, mapping *meta.RESTMapping) *refInformer {
	ctx, cancel := context.WithCancel(parent)
	inf := &refInformer{key: key, stop: cancel, done: ctx.Done(), failed: make(chan struct{})}
	var res dynamic.ResourceInterface = c.dynamic.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		res = c.dynamic.Resource(mapping.Resource).Namespace(key.namespace)
	}
	narrow := func(o *metav1.ListOptions) {
		if key.name != "" {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", key.name).String()
		} else {
			o.LabelSelector = key.selector
		}
	}
	lw := toolscache.ToListWatcherWithWatchListSemantics(&toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			narrow(&o)
			l, err := res.List(ctx, o)
			inf.fail(err)
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			narrow(&o)
			w, err := res.Watch(ctx, o)
			inf.fail(err)
			return w, err
		},
	}, c.dynamic)
	requeue := func() { c.requeue(key) }
	store, ctrl := toolscache.NewInformerWithOptions(toolscache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &unstructured.Unstructured{},
		Handler: toolscache.ResourceEventHandlerDetailedFuncs{
			// The first list is what the holders read once synced.
			AddFunc: func(_ any, initial bool) {
				if !initial {
					requeue()
				}
			},
			UpdateFunc: func(any, any) { requeue() },
			DeleteFunc: func(any) { requeue() },
		},
		Transform: stripManagedFields,
	})
	inf.store, inf.synced = store, ctrl.HasSyncedChecker()
	go ctrl.RunWithContext(ctx)
	return inf
}

// stripManagedFields drops what no template reads and the cache would
// hold for every object.
func stripManagedFields(obj any) (any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		u.SetManagedFields(nil)
	}
	return obj, nil
}

// requeue queues every parent holding key.
func (c *referenceCache) requeue(key refKey) {
	c.mu.Lock()
	holders := c.index.holders(key)
	c.mu.Unlock()
	for _, h := range holders {
		h.kc.enqueueRequest(h.parent)
	}
}

// fail records a failed list or watch: a reconcile waiting for the
// informer's first list returns it rather than waiting.
func (inf *refInformer) fail(err error) {
	if err == nil {
		return
	}
	inf.mu.Lock()
	defer inf.mu.Unlock()
	if inf.listErr == nil {
		close(inf.failed)
	}
	inf.listErr = err
}

// wait returns once the informer has listed, or why it has not.
func (inf *refInformer) wait(ctx context.Context) error {
	timer := time.NewTimer(referenceSyncTimeout)
	defer timer.Stop()
	select {
	case <-inf.synced.Done():
		return nil
	case <-inf.failed:
	case <-inf.done:
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
	}
	if toolscache.IsDone(inf.synced) {
		return nil
	}
	inf.mu.Lock()
	err := inf.listErr
	inf.mu.Unlock()
	if err != nil {
		return fmt.Errorf("listing %s: %w", inf.key, err)
	}
	select {
	case <-inf.done:
		return fmt.Errorf("the watch of %s was stopped: no parent holds it any more", inf.key)
	default:
	}
	return fmt.Errorf("listing %s: no answer within %s", inf.key, referenceSyncTimeout)
}

// objects counts the objects held, for the tests.
func (c *referenceCache) objects() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, inf := range c.informers {
		n += len(inf.store.ListKeys())
	}
	return n
}

// kinds returns the kinds the kind's parents hold informers of.
func (c *referenceCache) kinds(kc *kindController) map[schema.GroupVersionKind]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[schema.GroupVersionKind]bool{}
	for k := range c.informers {
		for _, h := range c.index.holders(k) {
			if h.kc == kc {
				out[k.gvk] = true
			}
		}
	}
	return out
}

// Track implements reconciler.References.
func (kc *kindController) Track(parent types.NamespacedName, refs []templates.Reference) {
	kc.e.refs.track(refHolder{kc, parent}, refs)
}

// Read implements reconciler.References: the referenced object, or the
// objects its selector matches, from the engine's reference cache.
func (kc *kindController) Read(ctx context.Context, ref templates.Reference) ([]*unstructured.Unstructured, error) {
	return kc.e.refs.read(ctx, ref)
}

// dropReferences lets go of every reference the kind's parents hold: the
// kind's template was removed, and its controller only finishes
// deletions, which never read references.
func (kc *kindController) dropReferences() {
	kc.e.refs.releaseKind(kc)
}

// observeForHold is what the rollout's hold check sees of a parent
// (rollout.Hold.Observe): live with its references read as the reconcile
// reads them (render.Observe), from the engine's cache or, for a
// reference no parent holds, from the apiserver; an error when one cannot
// be placed or read, or does not exist, when the reconcile changes
// nothing.
func (kc *kindController) observeForHold(t *templates.Template, parent *unstructured.Unstructured, live map[string]any) (map[string]any, error) {
	obs, err := render.Observe(kc.context(), t, parent, live, kc, render.ObserveOptions{Scoper: kc.e.scoper, Limits: kc.e.opts.Limits})
	if err != nil {
		return nil, err
	}
	return obs.Observed, nil
}
