package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cuengine/engine/providers"
	"github.com/cuengine/engine/templates"
)

// jsonCopy returns v through JSON, so status holds only plain values.
func jsonCopy(v map[string]any) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out map[string]any
	if err := utiljson.Unmarshal(b, &out); err != nil {
		return nil
	}
	return out
}

// Condition types the engine sets on every parent.
const (
	// ConditionReady: the children and resources exist and are ready.
	ConditionReady = "Ready"
	// ConditionSynced: the last render and apply succeeded.
	ConditionSynced = "Synced"
)

// Condition reasons.
const (
	ReasonSynced           = "Synced"
	ReasonReady            = "Ready"
	ReasonWaiting          = "Waiting"
	ReasonNotSynced        = "NotSynced"
	ReasonTemplateError    = "TemplateError"
	ReasonInvalidSpec      = "InvalidSpec"
	ReasonChildConflict    = "ChildConflict"
	ReasonChildRefused     = "ChildRefused"
	ReasonApplyFailed      = "ApplyFailed"
	ReasonTemplateNotReady = "TemplateNotReady"
)

// maxMessage bounds a condition message.
const maxMessage = 1024

type condition struct {
	status  metav1.ConditionStatus
	reason  string
	message string
}

type problem struct{ reason, message string }

// statusUpdate collects what one reconcile found; writeStatus turns it into
// the parent's status, conditions and events in one place.
type statusUpdate struct {
	template    map[string]any
	templateSet bool
	problems    []problem
	synced      condition
	ready       condition
	onWritten   func()
	deferred    bool // children were written: the next reconcile writes the status

	// resources holds status.resources entries to set (nil value: remove).
	resources map[string]map[string]any
}

// setResource records a resource's external name and observation for
// status.resources.<name>.
func (s *statusUpdate) setResource(name string, rec *resourceRecord, obs providers.Observation, observed bool) {
	if s.resources == nil {
		s.resources = map[string]map[string]any{}
	}
	entry := map[string]any{"provider": rec.Provider, "externalName": rec.ExternalName}
	if observed {
		entry["exists"] = obs.Exists
		entry["ready"] = obs.Ready
		if obs.State != nil {
			entry["state"] = jsonCopy(obs.State)
		}
	}
	s.resources[name] = entry
}

func (s *statusUpdate) dropResource(name string) {
	if s.resources == nil {
		s.resources = map[string]map[string]any{}
	}
	s.resources[name] = nil
}

// resourcesReady reports which resources are not ready yet.
func (s *statusUpdate) resourcesWaiting() []string {
	var out []string
	for name, e := range s.resources {
		if e != nil && e["ready"] != true {
			out = append(out, fmt.Sprintf("resource %s (%v)", name, e["externalName"]))
		}
	}
	sort.Strings(out)
	return out
}

func newStatusUpdate(parent *unstructured.Unstructured) *statusUpdate {
	return &statusUpdate{
		synced: condition{status: metav1.ConditionTrue, reason: ReasonSynced, message: "children and resources are applied"},
		ready:  condition{status: metav1.ConditionUnknown, reason: ReasonWaiting},
	}
}

func (c condition) ok() bool { return c.status == metav1.ConditionTrue }

func (s *statusUpdate) setTemplateStatus(status map[string]any) {
	s.template, s.templateSet = status, true
}

// syncFailed records a problem: Synced becomes False with every problem's
// message, and the reason of the first.
func (s *statusUpdate) syncFailed(reason, message string) {
	for _, p := range s.problems {
		if p.reason == reason && p.message == message {
			return // found again by a second evaluation in the same reconcile
		}
	}
	s.problems = append(s.problems, problem{reason, message})
	var msgs []string
	for _, p := range s.problems {
		msgs = append(msgs, p.message)
	}
	s.synced = condition{status: metav1.ConditionFalse, reason: s.problems[0].reason, message: truncate(strings.Join(msgs, "; "))}
}

// templateFailed records an evaluation error: InvalidSpec when the parent
// violates the schema, TemplateError otherwise.
func (s *statusUpdate) templateFailed(err error) {
	reason := ReasonTemplateError
	var te *templates.Error
	if errors.As(err, &te) {
		spec := true
		for _, p := range te.Problems {
			if !strings.HasPrefix(p.Path, "parent.") {
				spec = false
			}
		}
		if spec {
			reason = ReasonInvalidSpec
		}
	}
	s.syncFailed(reason, templates.Summary(err, 3))
	s.ready = condition{status: metav1.ConditionFalse, reason: ReasonNotSynced, message: "the template could not be evaluated for this object"}
}

// setReady decides readiness: the template's own ready field when it has
// one, else every desired child exists and is ready by its kind's rules.
func (s *statusUpdate) setReady(out *templates.Result, desired, existing []*unstructured.Unstructured) {
	if !s.synced.ok() {
		s.ready = condition{status: metav1.ConditionFalse, reason: ReasonNotSynced, message: "not synced: " + s.synced.reason}
		return
	}
	if out.Ready != nil {
		if *out.Ready && len(s.resourcesWaiting()) == 0 {
			s.ready = condition{status: metav1.ConditionTrue, reason: ReasonReady, message: "the template reports ready"}
		} else {
			s.ready = condition{status: metav1.ConditionFalse, reason: ReasonTemplateNotReady, message: "the template reports not ready"}
		}
		return
	}
	// The message names what is not ready, not why: a child going from
	// "missing" to "0 of 1 replicas" to ready changes it once, not thrice,
	// so readiness progress costs no extra status writes.
	waiting := s.resourcesWaiting()
	for _, d := range desired {
		if live := find(existing, d); live == nil {
			waiting = append(waiting, fmt.Sprintf("%s %s", d.GetKind(), d.GetName()))
		} else if ok, _ := childReady(live); !ok {
			waiting = append(waiting, fmt.Sprintf("%s %s", d.GetKind(), d.GetName()))
		}
	}
	if len(waiting) > 0 {
		s.ready = condition{status: metav1.ConditionFalse, reason: ReasonWaiting, message: truncate("waiting for " + strings.Join(waiting, ", "))}
		return
	}
	s.ready = condition{status: metav1.ConditionTrue, reason: ReasonReady, message: "all children are ready"}
}

// writeStatus writes the parent's status if it changed and records a
// Warning event when Synced turns False or its message changes. A reconcile
// that failed with a transient error leaves the status alone.
func (r *reconciler) writeStatus(ctx context.Context, parent *unstructured.Unstructured, st *statusUpdate, result ctrl.Result, rerr error) (ctrl.Result, error) {
	if rerr != nil || st.deferred {
		return result, rerr
	}
	old, _, _ := unstructured.NestedMap(parent.Object, "status")
	next := r.nextStatus(parent, old, st)
	if !st.synced.ok() && syncedChanged(old, st.synced) {
		for _, p := range st.problems {
			r.warn(parent, p.reason, "Reconcile", "%s", p.message)
		}
	}
	if equality.Semantic.DeepEqual(old, next) {
		if st.onWritten != nil {
			st.onWritten()
		}
		return result, nil
	}
	updated := parent.DeepCopy()
	if err := unstructured.SetNestedMap(updated.Object, next, "status"); err != nil {
		return result, err
	}
	if err := r.e.writer.Status().Update(ctx, updated); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			log.FromContext(ctx).V(1).Info("status write conflicted; requeueing")
			return ctrl.Result{Requeue: true}, nil
		}
		return result, fmt.Errorf("writing status: %w", err)
	}
	if st.onWritten != nil {
		st.onWritten()
	}
	return result, nil
}

// nextStatus builds the status to store: the template's fields (or the old
// ones when the template failed), the engine's conditions and the observed
// generation, and the engine-owned resources map as it stands.
func (r *reconciler) nextStatus(parent *unstructured.Unstructured, old map[string]any, st *statusUpdate) map[string]any {
	next := map[string]any{}
	if st.templateSet {
		for k, v := range st.template {
			next[k] = v
		}
	} else {
		for k, v := range old {
			next[k] = v
		}
	}
	resources, _ := old["resources"].(map[string]any)
	if len(st.resources) > 0 {
		merged := map[string]any{}
		for k, v := range resources {
			merged[k] = v
		}
		for k, v := range st.resources {
			if v == nil {
				delete(merged, k)
			} else {
				merged[k] = v
			}
		}
		resources = merged
	}
	if len(resources) > 0 {
		next["resources"] = resources
	}
	conds := conditionsOf(old)
	gen := parent.GetGeneration()
	meta.SetStatusCondition(&conds, metav1.Condition{Type: ConditionSynced, Status: st.synced.status, Reason: st.synced.reason, Message: st.synced.message, ObservedGeneration: gen})
	meta.SetStatusCondition(&conds, metav1.Condition{Type: ConditionReady, Status: st.ready.status, Reason: st.ready.reason, Message: st.ready.message, ObservedGeneration: gen})
	sort.SliceStable(conds, func(i, j int) bool { return conds[i].Type < conds[j].Type })
	list := make([]any, 0, len(conds))
	for _, c := range conds {
		m, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(&c)
		list = append(list, m)
	}
	next["conditions"] = list
	next["observedGeneration"] = gen
	return next
}

func conditionsOf(status map[string]any) []metav1.Condition {
	raw, _ := status["conditions"].([]any)
	var out []metav1.Condition
	for _, item := range raw {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		var c metav1.Condition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c); err == nil {
			out = append(out, c)
		}
	}
	return out
}

func syncedChanged(old map[string]any, synced condition) bool {
	c := meta.FindStatusCondition(conditionsOf(old), ConditionSynced)
	return c == nil || c.Status != synced.status || c.Reason != synced.reason || c.Message != synced.message
}

func truncate(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	return s[:maxMessage-3] + "..."
}
