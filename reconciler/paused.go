package reconciler

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/cuengine/engine/contract"
)

// paused ends the reconcile of a parent that carries
// contract.AnnotationPaused: nothing is observed, evaluated, applied,
// pruned or called, so drift stays and a deletion waits at the finalizer;
// the only write is the Paused condition (with Stalled), once.
func (r *Reconciler) paused(parent *unstructured.Unstructured, st *status) (ctrl.Result, error) {
	st.paused = pausedMessage(parent)
	return ctrl.Result{}, nil
}

// pausedMessage says what the pause holds, for the Paused condition.
func pausedMessage(parent *unstructured.Unstructured) string {
	msg := fmt.Sprintf("%s is \"true\": the engine writes nothing for this object (children, external resources, status) and does not correct drift until it is removed", contract.AnnotationPaused)
	if parent.GetDeletionTimestamp() != nil {
		if len(parent.GetFinalizers()) > 0 {
			msg += "; its deletion waits at the finalizer until then"
		} else {
			msg += "; it has no finalizer, so its deletion goes on without the engine"
		}
	}
	return msg
}

// ignoredPause is the Paused condition of a parent whose
// contract.AnnotationPaused holds a value other than "true" ("True",
// "yes", "1", "true "): False, saying the value that would pause it. The
// annotation is read exactly, as Flux's and Cluster API's are, so a value
// that only looks like true does not pause; the condition (and the
// Warning event of pauseEvents) makes that seen. Zero when there is no
// such annotation.
func ignoredPause(parent *unstructured.Unstructured) condition {
	v, ok := parent.GetAnnotations()[contract.AnnotationPaused]
	if !ok || v == "true" {
		return condition{}
	}
	return condition{status: metav1.ConditionFalse, reason: contract.ReasonPauseValueIgnored, message: SafeMessage(fmt.Sprintf(
		"%s is %q, which does not pause: the one value that pauses is \"true\" (lower case, no spaces); the engine reconciles this object as usual", contract.AnnotationPaused, v))}
}

// pausedStatus is the status of a paused parent: the stored one, its
// Ready and Synced as they were, with Paused and Stalled True and no
// Reconciling.
func pausedStatus(parent *unstructured.Unstructured, stored map[string]any, message string) map[string]any {
	next := maps.Clone(stored)
	if next == nil {
		next = map[string]any{}
	}
	conds := contract.ConditionsOf(stored)
	gen := parent.GetGeneration()
	meta.SetStatusCondition(&conds, metav1.Condition{Type: contract.ConditionPaused, Status: metav1.ConditionTrue, Reason: contract.ReasonPaused, Message: message, ObservedGeneration: gen})
	meta.SetStatusCondition(&conds, metav1.Condition{Type: contract.ConditionStalled, Status: metav1.ConditionTrue, Reason: contract.ReasonPaused, Message: message, ObservedGeneration: gen})
	meta.RemoveStatusCondition(&conds, contract.ConditionReconciling)
	next[contract.StatusConditions] = conditionValues(conds)
	return next
}

// pauseEvents records the pause and the resume, once each: when the
// stored Paused condition turns; and a Warning when an annotation that
// does not pause appears or changes value (ignoredPause).
func (r *Reconciler) pauseEvents(parent *unstructured.Unstructured, stored map[string]any, st *status) {
	storedPaused := meta.FindStatusCondition(contract.ConditionsOf(stored), contract.ConditionPaused)
	was := storedPaused != nil && storedPaused.Status == metav1.ConditionTrue
	if ig := ignoredPause(parent); ig.status != "" && !ig.equal(storedPaused) {
		warn(r.recorder, parent, contract.ReasonPauseValueIgnored, "Pause", "%s", ig.message)
	}
	switch {
	case st.paused != "" && !was:
		r.normal(parent, contract.ReasonPaused, "Pause", "%s", st.paused)
	case st.paused == "" && was:
		r.normal(parent, contract.ReasonResumed, "Resume", "%s removed: reconciling", contract.AnnotationPaused)
	}
}

// conditionValues returns conditions sorted by type, as JSON values.
func conditionValues(conds []metav1.Condition) []any {
	slices.SortStableFunc(conds, func(a, b metav1.Condition) int { return strings.Compare(a.Type, b.Type) })
	out := make([]any, 0, len(conds))
	for _, c := range conds {
		out = append(out, contract.ConditionValue(c))
	}
	return out
}
