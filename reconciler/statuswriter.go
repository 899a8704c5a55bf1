package reconciler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cuengine/engine/contract"
)

// statusWriter writes the statuses that the reconciles of one kind build,
// on goroutines of its own: a reconcile worker hands its parent's status
// over and moves on to the next parent instead of waiting for the write.
//
// The writer keeps the latest status per parent. A reconcile builds its
// status on what the parent will hold once the engine's own pending write
// is stored (statusBase), so: a newer status replaces a queued one that was
// never written, and the parent gets one write for both; a status equal to
// the pending one is not written again; one built on a write in flight is
// written after it, over what it stored. Each write is conditional on the
// parent's resource version, and ends in one of:
//
//   - stored: the record of it is kept until a reconcile finds the cache
//     showing it (statusBase), and the reconcile's onWritten runs (which
//     records its inputs as settled, settled.go);
//   - the parent gone: dropped;
//   - a conflict: the parent changed since the status was built, which may
//     have made it stale: dropped, with any status built on it, and the
//     parent reconciled again after ConflictDelay;
//   - too large for the apiserver: written again without the template's
//     fields (shrink);
//   - stored with fields the apiserver dropped (its warnings say which:
//     the CRD does not declare them): written again with the problem on
//     Synced and a Warning event; later writes leave those fields out
//     (leaveOutDropped), so the status settles;
//   - any other error: logged and retried with backoff, unless a newer
//     status for the parent replaced it meanwhile.
type statusWriter struct {
	kind   schema.GroupVersionKind
	writer client.Client
	// recorder records the Warning of a status too large (shrink).
	recorder events.EventRecorder
	// requeue asks for a reconcile of the parent, after ConflictDelay.
	requeue func(types.NamespacedName)
	// quiet paces the writes that change nothing anyone acts on
	// (quietChange); nil writes them at once.
	quiet *rate.Limiter

	mu sync.Mutex
	// queue holds the parents with a status to write; nil while the
	// writer does not run.
	queue   workqueue.TypedRateLimitingInterface[types.NamespacedName]
	queued  map[types.NamespacedName]*statusWrite // not started yet
	writing map[types.NamespacedName]*statusWrite // in flight
	written map[types.NamespacedName]writtenStatus
	// dropped are the template's status fields the apiserver dropped from
	// the last write to each parent.
	dropped map[types.NamespacedName]droppedFields
}

// droppedFields are status fields the apiserver dropped, below status, for
// the template revision that rendered them: a new revision may come with
// a CRD that declares them.
type droppedFields struct {
	paths    []string
	revision string
}

// statusWrite is one parent's status on its way to the apiserver.
type statusWrite struct {
	parent *unstructured.Unstructured // as the reconcile saw it
	st     *status                    // what the reconcile found
	// stored is the status next was built on; next is the status to store.
	stored, next map[string]any
	// base is the parent the status is written over: the write is
	// conditional on its resource version. A status built on a write still
	// pending has prev instead, and is written over what prev stored, or
	// over prev's base if prev was not stored.
	base *unstructured.Unstructured
	prev *statusWrite
	// version, when set, is the version the status is written through
	// (statusVersion), not base's.
	version string
	// onWritten runs once the status is stored.
	onWritten func()
	// paced: queued quiet, after the writer's pace (put).
	paced bool

	// Set by the writer, under its lock, when the write is over.
	done   bool
	result *unstructured.Unstructured // the parent as stored; nil when not stored
}

// writtenStatus is the engine's last status write to a parent, kept until
// the cache shows it.
type writtenStatus struct {
	rv  string
	sum [32]byte
}

func newStatusWriter(kind schema.GroupVersionKind, writer client.Client, recorder events.EventRecorder, requeue func(types.NamespacedName), quiet *rate.Limiter) *statusWriter {
	return &statusWriter{kind: kind, writer: writer, recorder: recorder, requeue: requeue, quiet: quiet, queued: map[types.NamespacedName]*statusWrite{},
		writing: map[types.NamespacedName]*statusWrite{}, written: map[types.NamespacedName]writtenStatus{},
		dropped: map[types.NamespacedName]droppedFields{}}
}

// start runs the writer with n goroutines until stop is called. stop waits
// for them and drops the statuses not written yet: the writer is stopped
// with the kind's controller, and the next start reconciles every parent
// again, which builds them again.
func (w *statusWriter) start(ctx context.Context, n int) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	q := workqueue.NewTypedRateLimitingQueueWithConfig(RetryLimiter[types.NamespacedName](),
		workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "engine-status-" + strings.ToLower(contract.KindString(w.kind))})
	w.mu.Lock()
	w.queue = q
	w.mu.Unlock()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for w.writeNext(ctx, q) {
			}
		})
	}
	return func() {
		cancel()
		q.ShutDown()
		wg.Wait()
		w.mu.Lock()
		defer w.mu.Unlock()
		w.queue = nil
		for key, j := range w.queued {
			j.done = true
			delete(w.queued, key)
		}
	}
}

// pending returns the parent's latest status handed over and not stored
// yet (queued, else in flight), and that status; nil when there is none.
func (w *statusWriter) pending(key types.NamespacedName) (*statusWrite, map[string]any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	j := w.queued[key]
	if j == nil {
		j = w.writing[key]
	}
	if j == nil {
		return nil, nil
	}
	return j, j.next
}

// takeWritten returns and forgets the record of the engine's last status
// write to the parent.
func (w *statusWriter) takeWritten(key types.NamespacedName) (writtenStatus, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ws, ok := w.written[key]
	delete(w.written, key)
	return ws, ok
}

// forget drops what the writer holds for a parent that is gone.
func (w *statusWriter) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if j := w.queued[key]; j != nil {
		j.done = true
		delete(w.queued, key)
	}
	delete(w.written, key)
	delete(w.dropped, key)
}

// put hands over the status a reconcile built. unchanged: j.next is the
// status it was built on, so there is nothing to write; its onWritten runs
// once that status is stored. A quiet write (quietChange) waits for the
// writer's pace, unless it replaces one already waiting; any other goes
// at once, and takes the place of a quiet one that waits.
func (w *statusWriter) put(key types.NamespacedName, j *statusWrite, unchanged bool) {
	if unchanged {
		if run := w.after(j); run != nil {
			run()
		}
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.queue == nil {
		return // stopped: see start
	}
	p := w.queued[key]
	if p != nil {
		p.done = true // never written: j replaces it
		if p == j.prev {
			j.base, j.prev = p.base, p.prev // over what p would have been written over
		}
	}
	w.queued[key] = j
	if w.quiet != nil && quietChange(j.stored, j.next) {
		j.paced = true
		if p != nil && p.paced {
			return // the key is due already
		}
		if r := w.quiet.Reserve(); r.OK() && r.Delay() > 0 {
			w.queue.AddAfter(key, r.Delay())
			return
		}
	}
	w.queue.Add(key)
}

// after returns the onWritten of an unchanged status to run now: when the
// status it repeats is stored. When that status is still pending, it runs
// after that write instead of the write's own (the latest reconcile's
// inputs are the ones the status is settled for); when it was dropped, not
// at all.
func (w *statusWriter) after(j *statusWrite) func() {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch p := j.prev; {
	case p == nil || p.result != nil:
		return j.onWritten
	case !p.done:
		p.onWritten = j.onWritten
	}
	return nil
}

// writeNext writes the status of the next parent in the queue; false once
// the queue is shut down.
func (w *statusWriter) writeNext(ctx context.Context, q workqueue.TypedRateLimitingInterface[types.NamespacedName]) bool {
	key, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(key)
	j := w.take(key)
	if j == nil {
		q.Forget(key) // replaced, or its parent is gone
		return true
	}
	stored, wrote, err := w.write(ctx, j)
	run, retry := w.end(q, key, j, stored, wrote, err)
	switch {
	case retry && ctx.Err() == nil:
		log.FromContext(ctx).Error(err, "cannot write the status; retrying", "kind", contract.KindString(w.kind), "object", key.String())
	case apierrors.IsConflict(err):
		log.FromContext(ctx).V(1).Info("status write conflicted; reconciling again", "kind", contract.KindString(w.kind), "object", key.String())
	}
	if run != nil {
		run()
	}
	return true
}

// take moves the parent's queued status to the writes in flight and
// settles what it is written over: a status built on a write still pending
// then is written over what that write stored, and built again on it when
// it differs from what it was built on.
func (w *statusWriter) take(key types.NamespacedName) *statusWrite {
	w.mu.Lock()
	defer w.mu.Unlock()
	j := w.queued[key]
	if j == nil {
		return nil
	}
	delete(w.queued, key)
	w.writing[key] = j
	if j.prev != nil {
		j.base, j.prev = j.prev.over(), nil
	}
	if over := statusOf(j.base); !equality.Semantic.DeepEqual(over, j.stored) {
		j.stored, j.next = over, nextStatus(j.parent, over, j.st)
	}
	return j
}

// write stores j's status over its base. It returns the parent as stored,
// nil when it is gone, and whether it wrote (the status may have turned out
// to be stored already).
func (w *statusWriter) write(ctx context.Context, j *statusWrite) (*unstructured.Unstructured, bool, error) {
	w.leaveOutDropped(j)
	if equality.Semantic.DeepEqual(j.next, j.stored) {
		return j.base, false, nil
	}
	patch, err := statusPatch(j.base.GetResourceVersion(), j.stored, j.next)
	if err != nil {
		return nil, false, err
	}
	// The reply is the parent's metadata only (read in protobuf): the new
	// resource version is all the writer needs of it, where the whole
	// object would be decoded only to be dropped.
	reply := &metav1.PartialObjectMetadata{}
	gvk := j.base.GroupVersionKind()
	if j.version != "" {
		gvk.Version = j.version
	}
	reply.SetGroupVersionKind(gvk)
	reply.SetNamespace(j.base.GetNamespace())
	reply.SetName(j.base.GetName())
	reply.SetResourceVersion(j.base.GetResourceVersion())
	wctx, warned := collectWarnings(ctx)
	err = w.writer.Status().Patch(wctx, reply, client.RawPatch(types.MergePatchType, patch))
	switch {
	case err == nil:
		updated := withStatus(j.base, j.next)
		updated.SetResourceVersion(reply.GetResourceVersion())
		if dropped := warned.droppedStatusFields(); w.learnDropped(j, dropped) {
			updated.Object["status"] = withoutPaths(j.next, dropped) // as the apiserver stored it
			j.base, j.stored = updated, statusOf(updated)
			again, _, err := w.write(ctx, j)
			return again, true, err
		}
		return updated, true, nil
	case apierrors.IsNotFound(err):
		return nil, false, nil // deleted meanwhile
	case tooLarge(err) && j.st.template.set:
		w.shrink(j, err)
		return w.write(ctx, j)
	}
	return nil, false, err
}

// statusPatch is the JSON merge patch that turns the status stored into
// next, conditional on the parent's resource version: what a write of the
// whole object with next as its status would store, without sending the
// rest of the object. The writer builds each status on the one stored at
// that resource version (take), so the patch's nulls remove exactly the
// fields next no longer has.
func statusPatch(resourceVersion string, stored, next map[string]any) ([]byte, error) {
	var status any = next
	switch {
	case stored == nil:
	case jsonValue(stored) && jsonValue(next):
		status = mergeDiff(stored, next) // mergepatch.go
	default: // a value of another type: through its JSON
		from, err := json.Marshal(stored)
		if err != nil {
			return nil, err
		}
		to, err := json.Marshal(next)
		if err != nil {
			return nil, err
		}
		diff, err := jsonpatch.CreateMergePatch(from, to)
		if err != nil {
			return nil, err
		}
		status = json.RawMessage(diff)
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": resourceVersion},
		"status":   status,
	})
}

// shrink builds j's status again without the template's fields, which keep
// their stored values, when the apiserver found it too large to store; it
// says why on Synced, with a Warning event.
func (w *statusWriter) shrink(j *statusWrite, err error) {
	st := *j.st
	st.problems = slices.Clone(st.problems)
	st.template = templateStatus{}
	st.fail(contract.ReasonStatusTooLarge, terminalError(contract.ReasonStatusTooLarge, fmt.Errorf(
		"the status the template renders is too large to store (%v); the template's status fields keep their last values", err)))
	next := nextStatus(j.parent, j.stored, &st)
	warnProblems(w.recorder, j.parent, j.stored, &st)
	w.mu.Lock()
	defer w.mu.Unlock()
	j.st, j.next = &st, next
}

// learnDropped records the template's status fields the apiserver dropped
// from j's write, with a Warning event on the parent; false when it drops
// nothing it had not dropped before.
func (w *statusWriter) learnDropped(j *statusWrite, paths []string) bool {
	if len(paths) == 0 {
		return false
	}
	key := client.ObjectKeyFromObject(j.parent)
	w.mu.Lock()
	known := w.dropped[key]
	if known.revision == revisionOf(j.st) && !slices.ContainsFunc(paths, func(p string) bool { return !slices.Contains(known.paths, p) }) {
		w.mu.Unlock()
		return false
	}
	d := droppedFields{paths: paths, revision: revisionOf(j.st)}
	w.dropped[key] = d
	w.mu.Unlock()
	warn(w.recorder, j.parent, contract.ReasonStatusFieldsDropped, "WriteStatus", "%s", d.message(w.kind))
	return true
}

// leaveOutDropped builds j's status again without the fields the apiserver
// dropped from the parent's last status write by the same template
// revision, with the problem on Synced: what the apiserver stores, so the
// status settles instead of being written again on every reconcile.
func (w *statusWriter) leaveOutDropped(j *statusWrite) {
	w.mu.Lock()
	d, ok := w.dropped[client.ObjectKeyFromObject(j.parent)]
	w.mu.Unlock()
	if !ok || !j.st.template.set || d.revision != revisionOf(j.st) {
		return
	}
	st := *j.st
	st.problems = slices.Clone(st.problems)
	st.fail(contract.ReasonStatusFieldsDropped, terminalError(contract.ReasonStatusFieldsDropped, errors.New(d.message(w.kind))))
	next := withoutPaths(nextStatus(j.parent, j.stored, &st), d.paths)
	w.mu.Lock()
	defer w.mu.Unlock()
	j.st, j.next = &st, next
}

// message says which fields were dropped and what to do about it.
func (d droppedFields) message(kind schema.GroupVersionKind) string {
	paths := make([]string, len(d.paths))
	for i, p := range d.paths {
		paths[i] = "status." + p
	}
	return fmt.Sprintf("the apiserver dropped status fields the template renders (%s): the CRD of %s does not declare them; install the CRD the template generates (engine crds)",
		strings.Join(paths, ", "), contract.KindString(kind))
}

// revisionOf is the template revision a status was rendered with.
func revisionOf(st *status) string {
	if st.revision == nil {
		return ""
	}
	return st.revision.Hash
}

// end records how j's write ended. It returns j's onWritten when the
// status was stored, and whether the write is retried.
func (w *statusWriter) end(q workqueue.TypedRateLimitingInterface[types.NamespacedName], key types.NamespacedName, j *statusWrite, stored *unstructured.Unstructured, wrote bool, err error) (func(), bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.writing, key)
	switch {
	case err == nil:
		q.Forget(key)
		j.done, j.result = true, stored
		if stored == nil {
			return nil, false
		}
		if wrote {
			w.written[key] = writtenStatus{rv: stored.GetResourceVersion(), sum: statusSum(j.next)}
		}
		return j.onWritten, false
	case apierrors.IsConflict(err):
		// A status queued meanwhile was built on j, on the same stale parent.
		q.Forget(key)
		j.done = true
		if n := w.queued[key]; n != nil {
			n.done = true
			delete(w.queued, key)
		}
		w.requeue(key)
		return nil, false
	case w.queued[key] != nil:
		j.done = true // replaced by a newer status
		return nil, false
	}
	w.queued[key] = j
	q.AddRateLimited(key)
	return nil, true
}

// over returns the parent a status built on j is written over: j's
// result once stored, else what j was (or would have been) written over.
func (j *statusWrite) over() *unstructured.Unstructured {
	switch {
	case j.result != nil:
		return j.result
	case j.base != nil:
		return j.base
	}
	return j.prev.over()
}

// withStatus returns a copy of parent with status as its status, without
// copying the status it replaces.
func withStatus(parent *unstructured.Unstructured, status map[string]any) *unstructured.Unstructured {
	obj := make(map[string]any, len(parent.Object)+1)
	for k, v := range parent.Object {
		if k != "status" {
			obj[k] = runtime.DeepCopyJSONValue(v)
		}
	}
	obj["status"] = runtime.DeepCopyJSON(status)
	return &unstructured.Unstructured{Object: obj}
}

// statusOf returns the parent's status, not copied.
func statusOf(parent *unstructured.Unstructured) map[string]any {
	s, _ := parent.Object["status"].(map[string]any)
	return s
}
