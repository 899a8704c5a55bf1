package harness

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// myKindGVR is the resource of the parents.
var myKindGVR = schema.GroupVersionResource{Group: "webapp.my.domain", Version: "v1", Resource: "mykinds"}

// Which informer a goal is about.
const (
	onDeployments = "deployments"
	onMyKinds     = "mykinds"
)

// goal is a state the harness waits for: want objects of one kind, in one
// namespace, for which ok holds.
type goal struct {
	on        string // onDeployments or onMyKinds
	namespace string
	want      int
	// ok receives an *appsv1.Deployment or an *unstructured.Unstructured.
	ok func(obj any) bool
}

// watcher keeps informers on Deployments and MyKinds and tells when a goal
// is reached, from their events.
type watcher struct {
	informers map[string]cache.SharedIndexInformer
	stop      context.CancelFunc
	lastEvent atomic.Int64 // unix nanoseconds of the latest event

	mu     sync.Mutex
	active *tracking
}

// tracking is the progress towards one goal.
type tracking struct {
	goal
	met     map[string]bool
	reached chan struct{}
	// reachedAt is when the goal was reached; read it once reached is
	// closed.
	reachedAt time.Time
}

// startWatcher starts the informers and waits for their caches to sync.
func startWatcher(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface) (*watcher, error) {
	ctx, cancel := context.WithCancel(ctx)
	typed := informers.NewSharedInformerFactory(cs, 0)
	untyped := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	w := &watcher{stop: cancel, informers: map[string]cache.SharedIndexInformer{
		onDeployments: typed.Apps().V1().Deployments().Informer(),
		onMyKinds:     untyped.ForResource(myKindGVR).Informer(),
	}}
	for on, inf := range w.informers {
		if _, err := inf.AddEventHandler(w.handler(on)); err != nil {
			cancel()
			return nil, fmt.Errorf("watching %s: %w", on, err)
		}
	}
	typed.Start(ctx.Done())
	untyped.Start(ctx.Done())
	for on, inf := range w.informers {
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			cancel()
			return nil, fmt.Errorf("syncing the %s informer: %w", on, context.Cause(ctx))
		}
	}
	return w, nil
}

// handler feeds one informer's events to the active goal.
func (w *watcher) handler(on string) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.observe(on, obj, false) },
		UpdateFunc: func(_, obj any) { w.observe(on, obj, false) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			w.observe(on, obj, true)
		},
	}
}

// observe records one event.
func (w *watcher) observe(on string, obj any, deleted bool) {
	w.lastEvent.Store(time.Now().UnixNano())
	w.mu.Lock()
	defer w.mu.Unlock()
	if t := w.active; t != nil && t.on == on {
		t.update(obj, deleted)
	}
}

// update records whether obj meets the goal, and closes reached when
// enough do.
func (t *tracking) update(obj any, deleted bool) {
	ns, name, err := cache.SplitMetaNamespaceKey(keyOf(obj))
	if err != nil || ns != t.namespace {
		return
	}
	if !deleted && t.ok(obj) {
		t.met[name] = true
	} else {
		delete(t.met, name)
	}
	t.check()
}

// check closes reached once enough objects meet the goal.
func (t *tracking) check() {
	if len(t.met) < t.want {
		return
	}
	select {
	case <-t.reached:
	default:
		t.reachedAt = time.Now()
		close(t.reached)
	}
}

// keyOf returns namespace/name of an informer object.
func keyOf(obj any) string {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return ""
	}
	return key
}

// track makes g the active goal, counting what the caches already hold.
func (w *watcher) track(g goal) *tracking {
	t := &tracking{goal: g, met: map[string]bool{}, reached: make(chan struct{})}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.active = t
	for _, obj := range w.informers[g.on].GetStore().List() {
		t.update(obj, false)
	}
	t.check()
	return t
}

// progress returns how many objects meet the active goal.
func (w *watcher) progress(t *tracking) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(t.met)
}

// get returns an object from an informer's cache.
func (w *watcher) get(on, namespace, name string) (any, bool) {
	obj, ok, err := w.informers[on].GetStore().GetByKey(namespace + "/" + name)
	return obj, ok && err == nil
}

// quietFor reports whether no event has arrived for d.
func (w *watcher) quietFor(d time.Duration) bool {
	return time.Since(w.lastEventAt()) >= d
}

// lastEventAt returns when the latest event arrived.
func (w *watcher) lastEventAt() time.Time { return time.Unix(0, w.lastEvent.Load()) }

// close stops the informers.
func (w *watcher) close() { w.stop() }
