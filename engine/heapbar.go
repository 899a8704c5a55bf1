package engine

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/reconciler"
	"github.com/cuengine/engine/render"
)

// heapBarEvery is how often the live heap is read against the hard bar
// besides each admission (no evaluation starts while runaways grow it): a
// read costs a microsecond, and fifty runaways grow the heap by 50 MiB a
// second.
const heapBarEvery = 100 * time.Millisecond

// heapBar is the runnable that ends the engine at the budget's hard heap
// bar (render.Budget.WatchHeap): the memory the Go runtime holds past it
// while evaluations past the
// timeout run, it makes sure each of their parents carries
// contract.AnnotationEvaluationOverran (written at the timeout; written
// again here if that write failed), puts a Warning event on each, logs
// one error line, and returns render.HeapExceeded: the manager then stops
// as on SIGTERM (the leases released) and `engine run` exits non-zero, for
// the kubelet to restart it. It runs on every replica: the hold checks of
// a rollout evaluate too.
type heapBar struct{ e *Engine }

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (heapBar) NeedLeaderElection() bool { return false }

// Start implements manager.Runnable.
func (h heapBar) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("heap")
	x := h.e.budget.WatchHeap(ctx, render.HeapWatch{
		Every: heapBarEvery,
		Grace: h.e.opts.Limits.EvaluationTimeout,
		High: func(held, bar uint64) {
			logger.Info("memory past the hard bar, with no evaluation past the timeout: the engine goes on, refusing evaluations over --max-evaluation-heap",
				"heldMiB", held>>20, "barMiB", bar>>20)
		},
		HighEvery: time.Minute,
	})
	if x == nil {
		return nil
	}
	h.e.heapExceeded.Store(x)
	unrecorded := h.e.recordOverruns(ctx, x)
	logger.Error(nil, "memory past the hard bar while evaluations past the timeout run: exiting, for a restart to free them",
		"heldMiB", x.Held>>20, "liveHeapMiB", x.Heap>>20, "barMiB", x.Bar>>20, "overrunning", x.Objects(), "unrecorded", unrecorded)
	return x
}

// HeapExceeded returns why the engine stopped at the hard heap bar, or nil.
func (e *Engine) HeapExceeded() *render.HeapExceeded { return e.heapExceeded.Load() }

// recordOverruns makes sure each parent whose evaluation runs past the
// timeout carries contract.AnnotationEvaluationOverran for it, and puts
// the Warning event on it; it returns the parents it could not annotate,
// with why. A parent gone, or whose spec changed since (another
// generation, which the restarted engine evaluates), needs nothing.
func (e *Engine) recordOverruns(ctx context.Context, x *render.HeapExceeded) []string {
	var (
		mu         sync.Mutex
		unrecorded []string
		wg         sync.WaitGroup
	)
	failed := func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		unrecorded = append(unrecorded, msg)
	}
	// At once, a few at a time: the runaways grow while the engine waits
	// on the apiserver (one by one, 33 parents took seconds and the
	// process grew by hundreds of MiB meanwhile).
	slots := make(chan struct{}, recordAtOnce)
	annotated := map[render.Overrun]bool{}
	for _, o := range x.Overrunning {
		key := o
		key.Template, key.Generation = "", 0
		if annotated[key] {
			continue // another evaluation of the same parent
		}
		annotated[key] = true
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			parent, err := e.annotateOverrun(ctx, o, x.Overrunning)
			if err != nil {
				failed(fmt.Sprintf("%s: %v", o.NamespacedName, err))
			}
			if parent == nil {
				return
			}
			note := fmt.Sprintf("the engine held %d MiB, past the %d MiB hard bar (--max-evaluation-heap-hard), while this object's evaluation ran past --evaluation-timeout (template %s, generation %d), which CUE cannot stop: the engine restarts to free it, and does not evaluate this object again until its spec or the template changes",
				x.Held>>20, x.Bar>>20, o.Template, o.Generation)
			if err := e.exitEvent(ctx, parent, note); err != nil {
				failed(fmt.Sprintf("%s: event: %v", o.NamespacedName, err))
			}
		}()
	}
	wg.Wait()
	slices.Sort(unrecorded)
	return unrecorded
}

// recordAtOnce is how many parents the exit records at once.
const recordAtOnce = 16

// exitEvent writes the Warning event on the parent at once: the
// recorder's events are sent in the background, and the process ends.
// It is the event the recorder would write (reporting controller
// "engine").
func (e *Engine) exitEvent(ctx context.Context, parent *unstructured.Unstructured, note string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	now := time.Now()
	ns := parent.GetNamespace()
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	host, _ := os.Hostname()
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", parent.GetName(), now.UnixNano()), Namespace: ns},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: "engine",
		ReportingInstance:   "engine-" + host,
		Action:              "Exit",
		Reason:              contract.ReasonEvaluationHeapExceeded,
		Type:                corev1.EventTypeWarning,
		Note:                note,
		Regarding: corev1.ObjectReference{
			APIVersion: parent.GetAPIVersion(), Kind: parent.GetKind(), Namespace: parent.GetNamespace(), Name: parent.GetName(),
			UID: parent.GetUID(), ResourceVersion: parent.GetResourceVersion(),
		},
	}
	return e.writer.Create(ctx, ev)
}

// annotateOverrun reads the parent of o and, if it does not carry the
// annotation of one of its evaluations in runs, writes o's. It returns the
// parent, nil if it is gone or is another object now.
func (e *Engine) annotateOverrun(ctx context.Context, o render.Overrun, runs []render.Overrun) (*unstructured.Unstructured, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// The cache first: the annotation is written at the timeout, most
	// often seconds ago, and the runaways grow while the apiserver is
	// asked. Its kind is watched: its parents are reconciled.
	parent, want, err := overrunOf(ctx, e.parents, o, runs)
	if err != nil || parent == nil || want != nil {
		parent, want, err = overrunOf(ctx, e.apiReader, o, runs)
	}
	if err != nil || parent == nil || want == nil {
		return parent, err
	}
	if err := e.writer.Patch(ctx, parent, reconciler.OverranPatch(want.Annotation())); err != nil {
		return parent, fmt.Errorf("recording on the parent that its evaluation ran past the timeout: %w", err)
	}
	return parent, nil
}

// overrunOf reads the parent of o and returns it with the evaluation of
// runs whose annotation it should carry for its generation, nil if it
// carries it or has none running (its spec changed since: the new one is
// evaluated); a parent gone, or another object now, is nil.
func overrunOf(ctx context.Context, r client.Reader, o render.Overrun, runs []render.Overrun) (*unstructured.Unstructured, *render.Overrun, error) {
	parent := &unstructured.Unstructured{}
	parent.SetGroupVersionKind(o.GVK)
	if err := r.Get(ctx, o.NamespacedName, parent); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, nil
		}
		return nil, nil, err
	}
	if parent.GetUID() != o.UID {
		return nil, nil, nil
	}
	have := parent.GetAnnotations()[contract.AnnotationEvaluationOverran]
	var want *render.Overrun
	for i, r := range runs {
		if r.GVK != o.GVK || r.NamespacedName != o.NamespacedName || r.UID != o.UID || r.Generation != parent.GetGeneration() {
			continue
		}
		if have == r.Annotation() {
			return parent, nil, nil
		}
		want = &runs[i]
	}
	return parent, want, nil
}
