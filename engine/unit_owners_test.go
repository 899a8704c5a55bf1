package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cuengine/engine/templates"
	"github.com/cuengine/engine/templates/watch"
)

// listCache is a cache whose lists come from a fake client.
type listCache struct {
	cache.Cache
	r client.Reader
}

func (c listCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.r.List(ctx, list, opts...)
}

// heldRecorder records events, each held until release is closed, and
// counts the callers inside Eventf at once.
type heldRecorder struct {
	release chan struct{}
	entered chan string

	mu           sync.Mutex
	inside, most int
	events       []string
}

func (r *heldRecorder) Eventf(regarding k8sruntime.Object, _ k8sruntime.Object, _, _, _, note string, args ...any) {
	r.mu.Lock()
	r.inside++
	r.most = max(r.most, r.inside)
	r.mu.Unlock()
	msg := fmt.Sprintf(note, args...)
	r.entered <- msg
	<-r.release
	r.mu.Lock()
	r.inside--
	r.events = append(r.events, regarding.(client.Object).GetName()+": "+msg)
	r.mu.Unlock()
}

func (r *heldRecorder) recorded() (events []string, most int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...), r.most
}

// TestReloadFailuresReportedByOneWorker: distinct reload failures in a
// row are reported by one worker, one event at a time, and a newer
// failure replaces the one being reported.
func TestReloadFailuresReportedByOneWorker(t *testing.T) {
	scheme := k8sruntime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	for i := range 3 {
		require.NoError(t, c.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: fmt.Sprintf("p%d", i)}}))
	}
	rec := &heldRecorder{release: make(chan struct{}), entered: make(chan string, 16)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kc := &kindController{gvk: fenceParentKind}
	kc.tpl.Store(&templates.Template{Path: "shelf.cue"})
	e := &Engine{opts: Options{RequeueQPS: 1000}, parents: listCache{r: c}, recorder: rec, ctx: ctx,
		kinds: map[schema.GroupVersionKind]*kindController{fenceParentKind: kc}, failureWake: make(chan struct{}, 1)}
	worker := make(chan struct{})
	go func() {
		defer close(worker)
		e.reportReloadFailures(ctx)
	}()

	e.reportReloadFailure(ctx, errors.New("failure 0"))
	first := receiveWithin(t, rec.entered, "the first event")
	for i := 1; i < 5; i++ {
		e.reportReloadFailure(ctx, fmt.Errorf("failure %d", i))
	}
	select {
	case other := <-rec.entered:
		t.Fatalf("two events at once: %q while %q was held", other, first)
	case <-time.After(200 * time.Millisecond):
	}
	close(rec.release)
	require.Eventually(t, func() bool {
		events, _ := rec.recorded()
		return len(events) == 4
	}, 10*time.Second, 10*time.Millisecond)
	events, most := rec.recorded()
	assert.Equal(t, 1, most, "one event at a time")
	// The first failure being reported when the last came: p0 had its
	// event; the last failure is reported on every parent.
	last := "the template on disk cannot be served, this object is reconciled with the last good version: failure 4"
	assert.Equal(t, []string{"p0: " + first, "p0: " + last, "p1: " + last, "p2: " + last}, events)

	cancel()
	receiveWithin(t, worker, "the worker ends with the engine")
}

// TestEnqueueParksNothing: parents queued while the kind's controller is
// not running park no goroutine; they reach its queue once it starts, and
// those queued after go straight in.
func TestEnqueueParksNothing(t *testing.T) {
	kc := &kindController{gvk: fenceParentKind}
	parent := func(i int) *unstructured.Unstructured {
		p := &unstructured.Unstructured{}
		p.SetNamespace("apps")
		p.SetName(fmt.Sprintf("p%03d", i))
		return p
	}
	before := runtime.NumGoroutine()
	for i := range 100 {
		kc.Enqueue(parent(i))
		kc.Enqueue(parent(i)) // twice: queued once
	}
	assert.LessOrEqual(t, runtime.NumGoroutine(), before+2, "goroutines parked by Enqueue")

	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	require.NoError(t, kc.queueSource().Start(context.Background(), q))
	assert.Equal(t, 100, q.Len(), "the parents queued before the start")
	kc.Enqueue(parent(100))
	assert.Equal(t, 101, q.Len())
	got, _ := q.Get()
	assert.Equal(t, "apps", got.Namespace)
}

func receiveWithin[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not within 10s", what)
		var zero T
		return zero
	}
}

// TestRefusedSetsRetriedByOneWorker: sets the cluster refused are retried
// by one worker, not a goroutine each; only the newest is retried, and
// the worker ends with the engine.
func TestRefusedSetsRetriedByOneWorker(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := &Engine{retryWake: make(chan struct{}, 1)}
	worker := make(chan struct{})
	go func() {
		defer close(worker)
		e.retryRefused(ctx)
	}()
	before := runtime.NumGoroutine()
	sets := make([]*templates.Set, 10)
	for i := range sets {
		sets[i] = &templates.Set{}
		e.mu.Lock()
		e.reloadGen++
		gen := e.reloadGen
		e.mu.Unlock()
		e.queueRetry(gen, watch.ReloadEvent{Set: sets[i]})
	}
	assert.LessOrEqual(t, runtime.NumGoroutine(), before+1, "goroutines started by refused sets")
	require.Eventually(t, func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.set != nil && e.refused == nil
	}, 20*time.Second, 50*time.Millisecond, "the newest refused set accepted on a retry")
	e.mu.Lock()
	assert.Same(t, sets[9], e.set, "the newest set is the one retried")
	e.mu.Unlock()
	cancel()
	receiveWithin(t, worker, "the worker ends with the engine")
}

// TestConflictRequeueParksNothing: a parent requeued after a status
// conflict waits on the controller's queue, not on a timer goroutine.
func TestConflictRequeueParksNothing(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	kc := &kindController{gvk: fenceParentKind, queue: q}
	before := runtime.NumGoroutine()
	for i := range 50 {
		kc.requeueAfterConflict(types.NamespacedName{Namespace: "apps", Name: fmt.Sprintf("p%02d", i)})
	}
	assert.LessOrEqual(t, runtime.NumGoroutine(), before+2, "goroutines parked by the requeues")
	assert.Equal(t, 0, q.Len(), "nothing queued before the delay")
	require.Eventually(t, func() bool { return q.Len() == 50 }, 10*time.Second, 10*time.Millisecond)
}
