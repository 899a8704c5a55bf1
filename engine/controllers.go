package engine

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/reconciler"
	"github.com/cuengine/engine/revisions"
	"github.com/cuengine/engine/rollout"
	"github.com/cuengine/engine/templates"
)

// kindController is the controller of one parent kind. It can be started and
// stopped while the process runs; its template can be swapped in place.
type kindController struct {
	e   *Engine
	gvk schema.GroupVersionKind
	tpl atomic.Pointer[templates.Template]
	rec *reconciler.Reconciler
	// busy counts the reconciles in flight, for stall detection.
	busy *workers
	// ro holds the kind's revisions and rolls out new ones (package rollout).
	ro *rollout.Rollout
	// store is the kind's revisions, as ro records them.
	store *revisions.Store
	// gone: the template was removed; only deletions are finished.
	gone atomic.Bool

	mu      sync.Mutex
	ctx     context.Context // the kind's, from start until stop
	ctrl    controller.TypedController[reconcile.Request]
	cancel  context.CancelFunc
	running bool
	err     string
	// stored says the files' template cannot be stored as a revision and
	// the kind serves its newest stored one instead (storedfallback.go).
	stored   string
	watching map[schema.GroupVersionKind]bool
	// queue is the running controller's queue, for the parents queued
	// from outside its sources (enqueueRequest); nil while none runs.
	queue workqueue.TypedRateLimitingInterface[reconcile.Request]
	// pending are the parents queued while no controller runs, handed to
	// the next one's queue (queueSource).
	pending map[types.NamespacedName]struct{}
	// refsClosed: the kind's parents hold no reference (its template was
	// removed); set and read by the engine's reference cache.
	refsClosed atomic.Bool
}

func newKindController(e *Engine, t *templates.Template) *kindController {
	kc := &kindController{e: e, gvk: t.GVK, watching: map[schema.GroupVersionKind]bool{}}
	kc.tpl.Store(t)
	kc.busy = newWorkers(e.opts.MaxConcurrentReconciles, e.opts.StallAfter)
	kc.store = &revisions.Store{Client: e.writer, Reader: e.apiReader, Namespace: e.opts.RevisionNamespace, GVK: t.GVK}
	kc.ro = rollout.New(kc, t.GVK, kc.store,
		e.opts.RevisionHistoryLimit, rollout.Hold{Scoper: e.scoper, Limits: e.opts.Limits, Budget: e.budget, Observe: kc.observeForHold})
	kc.ro.SetAnalyzer(e.opts.Analyzer)
	kc.rec = reconciler.New(reconciler.Options{
		GVK:            t.GVK,
		Kind:           kc,
		Children:       kc,
		Parents:        e.parents,
		Live:           e.apiReader,
		Writer:         e.fenced(e.writer, t.GVK),
		StatusWriter:   e.fenced(e.statusWriter, t.GVK),
		Scoper:         e.scoper,
		Recorder:       e.recorder,
		Providers:      e.opts.Providers,
		References:     kc,
		ResourceResync: e.opts.ResourceResync,
		Limits:         e.opts.Limits,
		Budget:         e.budget,
		Requeue:        kc.requeueAfterConflict,
		Fence:          kc.fenceProvider,
		Clusters:       e.workload.forKind(kc), // clusters.go; nil without Options.Clusters
		QuietStatus:    e.quietStatus,
	})
	return kc
}

// fenceProvider is checked before each provider call of a reconcile
// (fence.go).
func (kc *kindController) fenceProvider(ctx context.Context) error {
	if err := kc.e.fence(ctx, kc.gvk, nil); err != nil {
		metricFenced.WithLabelValues("provider").Inc()
		return err
	}
	return nil
}

// Template is the template of the files for the kind; it implements
// reconciler.Kind and rollout.Kind.
func (kc *kindController) Template() *templates.Template { return kc.tpl.Load() }

// Retired implements reconciler.Kind.
func (kc *kindController) Retired() bool { return kc.gone.Load() }

func (kc *kindController) status() KindStatus {
	kc.mu.Lock()
	running, err := kc.running, cmp.Or(kc.err, kc.stored)
	kc.mu.Unlock()
	t := kc.Template()
	revision, held := kc.ro.Status()
	return KindStatus{Kind: contract.KindString(kc.gvk), Template: t.Path, Revision: cmp.Or(revision, t.Hash), Running: running, Retired: kc.Retired(), Error: err, Held: held, Stalled: kc.busy.stalled()}
}

// Fleet implements rollout.Kind.
func (kc *kindController) Fleet(ctx context.Context) ([]unstructured.Unstructured, error) {
	return kc.e.listFleet(ctx, kc.gvk)
}

// Children implements rollout.Kind.
func (kc *kindController) Children(ctx context.Context, parent *unstructured.Unstructured) ([]client.Object, error) {
	return kc.listEvery(ctx, parent)
}

// Event implements rollout.Kind.
func (kc *kindController) Event(obj runtime.Object, eventtype, reason, note string, args ...any) {
	kc.e.recorder.Eventf(obj, nil, eventtype, reason, "Rollout", note, args...)
}

// Sharded implements rollout.Kind.
func (kc *kindController) Sharded() bool { return kc.e.sharded() }

// Coordinates implements rollout.Kind.
func (kc *kindController) Coordinates() bool { return kc.e.coordinates() }

// TemplateFor implements reconciler.Kind: the parent's revision, from
// its rollout's view.
func (kc *kindController) TemplateFor(parent *unstructured.Unstructured) (*templates.Template, *revisions.Revision, error) {
	return kc.ro.TemplateFor(parent)
}

// Enqueue queues a parent for a reconcile, without waiting; it implements
// rollout.Kind.
func (kc *kindController) Enqueue(parent *unstructured.Unstructured) {
	kc.enqueueRequest(types.NamespacedName{Namespace: parent.GetNamespace(), Name: parent.GetName()})
}

// requeueAfterConflict queues a parent for a reconcile once the cache has
// had reconciler.ConflictDelay to show what a status write conflicted with.
func (kc *kindController) requeueAfterConflict(key types.NamespacedName) {
	kc.enqueueAfter(key, reconciler.ConflictDelay)
}

// start runs the controller in the background, on the engine's kindLoops
// (Start waits for them). Until the parent kind is served by the apiserver
// (its CRD installed), it retries with backoff and reports the error in
// Status, without affecting other kinds. The caller holds the engine's
// lock, so a start cannot race Start's wait.
func (kc *kindController) start(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	kc.mu.Lock()
	kc.ctx, kc.cancel = ctx, cancel
	kc.mu.Unlock()
	logger := log.FromContext(parent).WithValues("kind", contract.KindString(kc.gvk))
	kc.e.kindLoops.Go(func() {
		backoff := wait.Backoff{Duration: time.Second, Factor: 2, Steps: 1 << 30, Cap: 30 * time.Second}
		for attempt := 0; ; attempt++ {
			err := kc.run(ctx)
			if ctx.Err() != nil {
				return
			}
			kc.setErr(err)
			if attempt == 0 {
				logger.Error(err, "parent kind cannot be watched; retrying", "template", kc.Template().Path)
			} else {
				logger.V(1).Info("parent kind still cannot be watched", "error", err.Error())
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff.Step()):
			}
		}
	})
}

// context is the kind's context once started; a stopped kind's is done.
func (kc *kindController) context() context.Context {
	kc.mu.Lock()
	defer kc.mu.Unlock()
	if kc.ctx == nil {
		return context.Background()
	}
	return kc.ctx
}

func (kc *kindController) isRunning() bool {
	kc.mu.Lock()
	defer kc.mu.Unlock()
	return kc.running
}

func (kc *kindController) setErr(err error) {
	kc.mu.Lock()
	defer kc.mu.Unlock()
	kc.running = false
	kc.err = ""
	if err != nil {
		kc.err = err.Error()
	}
}

// run builds and runs the controller until ctx ends or it fails to start.
func (kc *kindController) run(ctx context.Context) error {
	if _, err := kc.e.mgr.GetRESTMapper().RESTMapping(kc.gvk.GroupKind(), kc.gvk.Version); err != nil {
		return fmt.Errorf("kind %s is not served by the cluster (is its CRD installed? `engine crds` prints it): %w", contract.KindString(kc.gvk), err)
	}
	skip := true
	ctrl, err := controller.NewTypedUnmanaged("engine-"+strings.ToLower(contract.KindString(kc.gvk)), controller.TypedOptions[reconcile.Request]{
		Reconciler:              kc.busy.wrap(kc.e.gate(kc.gvk, kc.rec)),
		MaxConcurrentReconciles: kc.e.opts.MaxConcurrentReconciles,
		SkipNameValidation:      &skip,
		Logger:                  kc.e.mgr.GetLogger(),
		RateLimiter:             reconciler.RetryLimiter[reconcile.Request](),
	})
	if err != nil {
		return err
	}
	parent := &unstructured.Unstructured{}
	parent.SetGroupVersionKind(kc.gvk)
	if err := startInformer(ctx, kc.e.parents, parent); err != nil { // informersync.go
		return err
	}
	if err := ctrl.Watch(source.Kind[*unstructured.Unstructured](cacheFor(kc.e.parents, parent), parent,
		&handler.TypedEnqueueRequestForObject[*unstructured.Unstructured]{}, parentChanged())); err != nil {
		return err
	}
	if err := ctrl.Watch(kc.queueSource()); err != nil {
		return err
	}
	kc.mu.Lock()
	kc.ctrl = ctrl
	kc.watching = map[schema.GroupVersionKind]bool{}
	kc.mu.Unlock()
	for _, gvk := range kc.Template().ChildKinds() {
		if err := kc.Watch(ctx, gvk); err != nil {
			log.FromContext(ctx).Error(err, "cannot watch child kind", "kind", contract.KindString(kc.gvk), "childKind", contract.KindString(gvk))
		}
	}
	if err := kc.serveStored(ctx); err != nil {
		return err
	}
	// The revisions are loaded before any parent is reconciled, so that
	// each is reconciled with the revision it runs.
	if err := kc.ro.Init(ctx); err != nil {
		return fmt.Errorf("loading the template revisions: %w", err)
	}
	// The coordinator owns the rollout's working state: it stops before
	// a retry of run calls init again.
	rolloutCtx, stopRollout := context.WithCancel(ctx)
	rolloutDone := make(chan struct{})
	go func() {
		defer close(rolloutDone)
		kc.ro.Run(rolloutCtx)
	}()
	defer func() { stopRollout(); <-rolloutDone }()
	kc.mu.Lock()
	kc.running, kc.err = true, ""
	kc.mu.Unlock()
	stopStatus := kc.rec.StartStatus(ctx, kc.e.opts.MaxConcurrentReconciles)
	err = ctrl.Start(ctx) // returns once its workers are done
	kc.mu.Lock()
	kc.queue = nil // shut down: the next controller's takes the parents queued meanwhile
	kc.mu.Unlock()
	stopStatus()
	if ctx.Err() == nil && err == nil {
		err = fmt.Errorf("controller stopped")
	}
	if ctx.Err() != nil {
		// Stopped on purpose: drop the parent informer so the cache stops
		// watching a kind nobody reconciles.
		_ = kc.e.parents.RemoveInformer(context.Background(), parent)
	}
	return err
}

// Watch implements reconciler.Children: events on children of one kind requeue
// their parents. It is called for the template's known child kinds at start
// and for any kind first seen in a reconcile.
func (kc *kindController) Watch(ctx context.Context, gvk schema.GroupVersionKind) error {
	kc.mu.Lock()
	ctrl := kc.ctrl
	already := kc.watching[gvk]
	if !already {
		kc.watching[gvk] = true
	}
	kc.mu.Unlock()
	if already || ctrl == nil {
		return nil
	}
	if err := kc.e.ensureChildIndex(ctx, gvk); err != nil {
		kc.forgetWatch(gvk)
		return err
	}
	child := kc.e.objects.object(gvk)
	if err := ctrl.Watch(source.Kind(cacheFor(kc.e.children, child), child, handler.TypedEnqueueRequestsFromMapFunc(kc.parentOf))); err != nil {
		kc.forgetWatch(gvk)
		return fmt.Errorf("watching %s: %w", gvk.Kind, err)
	}
	return nil
}

func (kc *kindController) forgetWatch(gvk schema.GroupVersionKind) {
	kc.mu.Lock()
	defer kc.mu.Unlock()
	delete(kc.watching, gvk)
}

// List implements reconciler.Children: the parent's children of every watched kind,
// from the label-selected child cache, through its parent-uid index.
func (kc *kindController) List(ctx context.Context, parent *unstructured.Unstructured) ([]client.Object, error) {
	return kc.listWatched(func(gvk schema.GroupVersionKind, list client.ObjectList) error {
		// The cached objects are only read, never modified: no deep copy.
		return listByParentUID(ctx, kc.e.children, kc.e.objects.object(gvk), list, string(parent.GetUID()), true) // parentindex.go
	})
}

// listEvery returns the parent's children of every watched kind wherever
// they are cached: from the child cache, which under sharding holds only
// this shard's children, so then from the apiserver (the rollout
// coordinator looks at every parent).
func (kc *kindController) listEvery(ctx context.Context, parent *unstructured.Unstructured) ([]client.Object, error) {
	if !kc.e.sharded() {
		return kc.List(ctx, parent)
	}
	return kc.listWatched(func(_ schema.GroupVersionKind, list client.ObjectList) error {
		return kc.e.apiReader.List(ctx, list, client.MatchingLabels{contract.LabelParentUID: string(parent.GetUID())})
	})
}

// listWatched lists, with read, the objects of every watched child kind:
// typed for the built-in kinds, unstructured for the others
// (childobjects.go).
func (kc *kindController) listWatched(read func(schema.GroupVersionKind, client.ObjectList) error) ([]client.Object, error) {
	kc.mu.Lock()
	kinds := slices.Collect(maps.Keys(kc.watching))
	kc.mu.Unlock()
	var out []client.Object
	for _, gvk := range kinds {
		list := kc.e.objects.list(gvk)
		if err := read(gvk, list); err != nil {
			return nil, fmt.Errorf("listing %s children: %w", gvk.Kind, err)
		}
		items, err := kc.e.objects.items(gvk, list)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
	}
	return out, nil
}

// parentOf maps a child to its parent through the parent annotation, which
// (unlike an owner reference) also works across namespaces.
func (kc *kindController) parentOf(_ context.Context, child client.Object) []reconcile.Request {
	ref := child.GetAnnotations()[contract.AnnotationParent]
	parts := strings.Split(ref, "/")
	if len(parts) != 3 || parts[0] != kc.gvk.GroupKind().String() {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: parts[1], Name: parts[2]}}}
}

// parentChanged lets through what a reconcile depends on: creation,
// deletion, spec (generation), labels, annotations, finalizers and the
// deletion timestamp. The engine's own status writes do not requeue.
func parentChanged() predicate.TypedPredicate[*unstructured.Unstructured] {
	return predicate.TypedFuncs[*unstructured.Unstructured]{
		UpdateFunc: func(ev event.TypedUpdateEvent[*unstructured.Unstructured]) bool {
			o, n := ev.ObjectOld, ev.ObjectNew
			return o.GetGeneration() != n.GetGeneration() ||
				!maps.Equal(o.GetLabels(), n.GetLabels()) ||
				!maps.Equal(o.GetAnnotations(), n.GetAnnotations()) ||
				!slices.Equal(o.GetFinalizers(), n.GetFinalizers()) ||
				!o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp())
		},
	}
}

// update swaps in a new version of the template; the kind's rollout
// records it as a revision and moves the parents to it as its policy says.
func (kc *kindController) update(t *templates.Template) {
	kc.mu.Lock()
	kc.stored = "" // a set with t was loaded: t can be stored
	kc.mu.Unlock()
	kc.refsClosed.Store(false) // a retired kind served again (references.go)
	old := kc.tpl.Swap(t)
	if old.Hash == t.Hash {
		return
	}
	ctx := kc.context()
	for _, gvk := range t.ChildKinds() {
		if err := kc.Watch(ctx, gvk); err != nil {
			log.FromContext(ctx).Error(err, "cannot watch child kind", "kind", contract.KindString(kc.gvk), "childKind", contract.KindString(gvk))
		}
	}
	kc.ro.Poke()
}

// RequeueAll queues every parent of the kind, no faster than RequeueQPS;
// it implements rollout.Kind.
func (kc *kindController) RequeueAll(ctx context.Context) {
	parents, err := kc.e.listParents(ctx, kc.gvk)
	if err != nil {
		log.FromContext(ctx).Error(err, "cannot list parents to requeue", "kind", contract.KindString(kc.gvk))
		return
	}
	limiter := rate.NewLimiter(rate.Limit(kc.e.opts.RequeueQPS), 1)
	for i := range parents {
		if err := limiter.Wait(ctx); err != nil {
			return
		}
		kc.Enqueue(&parents[i])
	}
}

// queueSource hands the controller's queue to the kind when the
// controller starts, with the parents queued before (enqueueRequest).
func (kc *kindController) queueSource() source.TypedSource[reconcile.Request] {
	return source.TypedFunc[reconcile.Request](func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		kc.mu.Lock()
		kc.queue = q
		pending := kc.pending
		kc.pending = nil
		kc.mu.Unlock()
		for key := range pending {
			q.Add(reconcile.Request{NamespacedName: key})
		}
		return nil
	})
}

// enqueueRequest queues a parent for a reconcile without waiting: into the
// running controller's queue, or, while none runs, into pending for the
// next one. It parks nothing: the queue does not block, and pending holds
// each parent once.
func (kc *kindController) enqueueRequest(parent types.NamespacedName) {
	kc.enqueueAfter(parent, 0)
}

// enqueueAfter queues a parent on the running controller's queue after
// delay, with no goroutine of its own; while no controller runs, it is
// pending at once for the next one.
func (kc *kindController) enqueueAfter(parent types.NamespacedName, delay time.Duration) {
	kc.mu.Lock()
	q := kc.queue
	if q == nil {
		if kc.pending == nil {
			kc.pending = map[types.NamespacedName]struct{}{}
		}
		kc.pending[parent] = struct{}{}
	}
	kc.mu.Unlock()
	if q != nil {
		q.AddAfter(reconcile.Request{NamespacedName: parent}, delay)
	}
}

func (kc *kindController) stop() {
	kc.e.refs.releaseKind(kc) // references.go
	kc.mu.Lock()
	defer kc.mu.Unlock()
	if kc.cancel != nil {
		kc.cancel()
	}
	kc.running = false
}
