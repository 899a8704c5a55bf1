package reconciler

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/internal/jsonhash"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/revisions"
	"github.com/cuengine/engine/templates"
)

// status is the parent's status under construction during one reconcile.
// Steps record what they find on it (their problems, the template's status,
// the resources they observed); writeStatus, deferred by Reconcile, is the
// one place that turns it into a status for the status writer, conditions
// and events. Once handed over it is only read.
type status struct {
	template templateStatus
	// resources holds the status.resources entries to set; a nil entry
	// removes one.
	resources map[string]*resourceStatus
	problems  []problem
	synced    condition
	ready     condition
	// revision is the template revision the parent was reconciled with,
	// for status.templateRevision; nil keeps the stored one.
	revision *revisions.Revision
	// skip: this reconcile's status is not worth writing (children or the
	// parent were written: the reconcile their watch event brings sees the
	// result), or there is no parent left to write it to.
	skip bool
	// onWritten runs once the status is stored (or found already stored),
	// on the status writer's goroutine when it writes it.
	onWritten func()
	// onSettled records this reconcile's inputs as settled (settled.go).
	onSettled func()
	// waits are the deletions held until what depends on them is gone
	// (order.go), for the Ready message.
	waits []string
	// pruneHeld: prune decided to delete a child and waits for its
	// dependents; the stored generation and revision stay (prune.go).
	pruneHeld bool
	// kept says which children prune kept (prune.go), for Ready.
	kept []string
	// paused is the Paused condition's message while the parent carries
	// contract.AnnotationPaused (paused.go); "" otherwise.
	paused string
}

// problem is one thing that keeps the parent from being synced.
type problem struct {
	reason, message string
	class           errorClass
	after           time.Duration
	// stalls: only a person can clear it (needsHuman).
	stalls bool
}

func newStatus() *status {
	return &status{
		synced: condition{status: metav1.ConditionTrue, reason: contract.ReasonSynced, message: "children and resources are applied"},
		ready:  condition{status: metav1.ConditionUnknown, reason: contract.ReasonWaiting},
	}
}

// fail records a problem: Synced becomes False with every problem's message
// and the reason of the first. err's class (see classify) decides how the
// reconcile is retried; its reason is used unless the caller gives one.
func (s *status) fail(reason string, err error) {
	class, classReason, after := classify(err, 0)
	if reason == "" {
		reason = classReason
	}
	msg := err.Error()
	for _, p := range s.problems {
		if p.reason == reason && p.message == msg {
			return // found again by a second evaluation in the same reconcile
		}
	}
	s.problems = append(s.problems, problem{reason: reason, message: msg, class: class, after: after, stalls: needsHuman(err)})
	msgs := make([]string, len(s.problems))
	for i, p := range s.problems {
		msgs[i] = p.message
	}
	s.synced = condition{status: metav1.ConditionFalse, reason: s.problems[0].reason, message: SafeMessage(strings.Join(msgs, "; "))}
}

// err is the reconcile's error when no step aborted: the problems it
// recorded, classed by the most urgent (transient, then waiting with the
// shortest delay, then terminal). Nil when there is none.
func (s *status) err(resourceResync time.Duration) error {
	if len(s.problems) == 0 {
		return nil
	}
	var worst *problem
	for i := range s.problems {
		p := s.problems[i]
		if p.class == waiting && p.after == 0 {
			p.after = resourceResync
		}
		if worst == nil || p.class < worst.class || (p.class == waiting && worst.class == waiting && p.after < worst.after) {
			worst = &p
		}
	}
	return &stepError{class: worst.class, reason: worst.reason, after: worst.after, err: errors.New(s.synced.message)}
}

// progress returns Stalled and Reconciling, the conditions that tell a
// parent that waits for a person from one still converging (kstatus:
// Failed on Stalled, InProgress on Reconciling, Current once Ready):
// Stalled while a problem needs a human (the first such one's reason and
// message), otherwise Reconciling until Synced and Ready are both True.
// Only a True one is stored (setConditions).
func (s *status) progress() (stalled, reconciling condition) {
	for _, p := range s.problems {
		if p.stalls {
			return condition{status: metav1.ConditionTrue, reason: p.reason, message: SafeMessage(p.message)}, condition{}
		}
	}
	if s.synced.ok() && s.ready.ok() {
		return condition{}, condition{}
	}
	why := s.ready
	if !s.synced.ok() {
		why = s.synced
	}
	return condition{}, condition{status: metav1.ConditionTrue, reason: why.reason, message: why.message}
}

// setResource records a resource's entry for status.resources.<name>.
func (s *status) setResource(name string, rs resourceStatus) {
	if s.resources == nil {
		s.resources = map[string]*resourceStatus{}
	}
	s.resources[name] = &rs
}

func (s *status) dropResource(name string) {
	if s.resources == nil {
		s.resources = map[string]*resourceStatus{}
	}
	s.resources[name] = nil
}

// resourcesSeen returns the resources observed in this reconcile.
func (s *status) resourcesSeen() map[string]resourceStatus {
	out := make(map[string]resourceStatus, len(s.resources))
	for name, rs := range s.resources {
		if rs != nil {
			out[name] = *rs
		}
	}
	return out
}

// templateFailed records an evaluation error and returns it classified: a
// limit exceeded keeps its own reason (render.Error); otherwise InvalidSpec
// when the parent violates the schema, TemplateError when the template
// fails for a valid parent.
func (s *status) templateFailed(err error) error {
	var classified *stepError
	var re *render.Error
	switch {
	case errors.As(err, &classified):
	case errors.As(err, &re):
		class, reason, after := classify(re, 0)
		classified = &stepError{class: class, reason: reason, after: after, err: re}
	default:
		reason := contract.ReasonTemplateError
		var te *templates.Error
		if errors.As(err, &te) && !slices.ContainsFunc(te.Problems, func(p templates.Problem) bool { return !strings.HasPrefix(p.Path, "parent.") }) {
			reason = contract.ReasonInvalidSpec
		}
		classified = &stepError{class: terminal, reason: reason, err: errors.New(templates.Summary(err, 3))}
	}
	s.fail(classified.reason, classified)
	s.ready = condition{status: metav1.ConditionFalse, reason: contract.ReasonNotSynced, message: "the template could not be evaluated for this object"}
	return classified
}

// writeStatus builds the parent's status and hands it to the kind's status
// writer (statuswriter.go), which writes it if it changed; it records a
// Warning event per problem when Synced turns False or its message
// changes. A reconcile that aborted on an error it did not record (the
// apiserver unreachable, say) leaves the status alone.
func (r *Reconciler) writeStatus(ctx context.Context, parent *unstructured.Unstructured, st *status, rerr error) error {
	if st.skip || (rerr != nil && len(st.problems) == 0) {
		return nil
	}
	j, err := r.statusBase(ctx, parent)
	if err != nil {
		return err
	}
	j.st, j.onWritten = st, st.onWritten
	j.version = statusVersion(r.kind.Template(), parent)
	j.next = nextStatus(parent, j.stored, st)
	warnProblems(r.recorder, parent, j.stored, st)
	r.pauseEvents(parent, j.stored, st)
	r.status.put(client.ObjectKeyFromObject(parent), j, equality.Semantic.DeepEqual(j.stored, j.next))
	return nil
}

// statusVersion is the version a parent's status is written through: for
// a kind stored in another version than the hub, whose conversions leave
// the status as it is, the stored one, so that the write converts
// nothing. Through the hub, the apiserver bases the write on its watch
// cache of the hub's objects, which one object that does not convert
// leaves stale for every object of the kind (engine/storedversion.go):
// a parent fixed in its stored version could not have its status
// written. "" otherwise: the parent's own version.
func statusVersion(t *templates.Template, parent *unstructured.Unstructured) string {
	if t == nil || !t.Converts() || t.ConvertsStatus() || parent.GroupVersionKind().Version != t.GVK.Version {
		return ""
	}
	return t.StorageVersion()
}

// warnProblems records a Warning event per problem when Synced turns False
// or its message changes from the stored one.
func warnProblems(recorder events.EventRecorder, parent *unstructured.Unstructured, stored map[string]any, st *status) {
	if st.synced.ok() || st.synced.equal(meta.FindStatusCondition(contract.ConditionsOf(stored), contract.ConditionSynced)) {
		return
	}
	for _, p := range st.problems {
		warn(recorder, parent, p.reason, "Reconcile", "%s", SafeMessage(p.message))
	}
}

func statusSum(status map[string]any) [32]byte {
	sum, err := jsonhash.Sum(status) // the hash of its JSON, map keys sorted: stable
	if err != nil {
		return sha256.Sum256(nil) // as the hash of the JSON that failed
	}
	return sum
}

// statusBase returns the status write the reconcile's status is built on:
// what the parent will hold once the engine's pending status write is
// stored, when one is pending; otherwise the cached parent, unless the
// cache has not shown the engine's own last status write yet (neither its
// resource version nor its content), when comparing with it could skip a
// needed write; then the apiserver's.
func (r *Reconciler) statusBase(ctx context.Context, parent *unstructured.Unstructured) (*statusWrite, error) {
	key := client.ObjectKeyFromObject(parent)
	if p, next := r.status.pending(key); p != nil {
		return &statusWrite{parent: parent, prev: p, stored: next}, nil
	}
	j := &statusWrite{parent: parent, base: parent, stored: statusOf(parent)}
	w, ok := r.status.takeWritten(key)
	if !ok || w.rv == parent.GetResourceVersion() || statusSum(j.stored) == w.sum {
		return j, nil // the cache shows it, or a later write by someone else over it
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(parent.GroupVersionKind())
	if err := r.live.Get(ctx, key, live); err != nil {
		return nil, fmt.Errorf("reading the parent's status: %w", err)
	}
	j.base, j.stored = live, statusOf(live)
	return j, nil
}

// tooLarge reports an object over the apiserver's size limit (413) or
// etcd's (which the apiserver returns as an internal error).
func tooLarge(err error) bool {
	return apierrors.IsRequestEntityTooLargeError(err) || strings.Contains(err.Error(), "request is too large")
}

// nextStatus builds the status to store: the template's fields (or the
// stored ones when the template failed), the engine's conditions and
// observed generation, and status.resources as it stands.
func nextStatus(parent *unstructured.Unstructured, stored map[string]any, st *status) map[string]any {
	if st.paused != "" {
		return pausedStatus(parent, stored, st.paused)
	}
	next := map[string]any{}
	st.template.merge(next, stored)
	resources, _ := stored[contract.StatusResources].(map[string]any)
	if len(st.resources) > 0 {
		resources = maps.Clone(resources)
		if resources == nil {
			resources = map[string]any{}
		}
		for name, rs := range st.resources {
			if rs == nil {
				delete(resources, name)
			} else {
				resources[name] = rs.toMap()
			}
		}
	}
	delete(next, contract.StatusResources)
	if len(resources) > 0 {
		next[contract.StatusResources] = resources
	}
	if st.revision != nil && !st.pruneHeld {
		next[contract.StatusTemplateRevision] = contract.TemplateRevisionStatus(st.revision.Number, st.revision.Hash)
	} else if stored[contract.StatusTemplateRevision] != nil {
		next[contract.StatusTemplateRevision] = stored[contract.StatusTemplateRevision]
	}
	if token := parent.GetAnnotations()[contract.AnnotationReconcileRequestedAt]; token != "" {
		next[contract.StatusLastHandledReconcileAt] = token
	} else if stored[contract.StatusLastHandledReconcileAt] != nil {
		next[contract.StatusLastHandledReconcileAt] = stored[contract.StatusLastHandledReconcileAt]
	}
	gen := parent.GetGeneration()
	stalled, reconciling := st.progress()
	next[contract.StatusConditions] = setConditions(contract.ConditionsOf(stored), gen, st.synced, st.ready, stalled, reconciling, ignoredPause(parent))
	next[contract.StatusObservedGeneration] = gen
	if st.pruneHeld {
		// Not done with this generation until the pruning is: a later
		// reconcile must still see the change that decided it.
		if g, ok := stored[contract.StatusObservedGeneration]; ok {
			next[contract.StatusObservedGeneration] = g
		} else {
			delete(next, contract.StatusObservedGeneration)
		}
	}
	return next
}
