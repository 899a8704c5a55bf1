package contract

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Condition types the engine sets on every parent.
const (
	// ConditionReady: the children and resources exist and are ready.
	ConditionReady = "Ready"
	// ConditionSynced: the last render and apply succeeded.
	ConditionSynced = "Synced"
	// ConditionStalled: the parent cannot make progress until a human
	// changes it, its template or what they name (a terminal problem: see
	// kstatus, sigs.k8s.io/cli-utils/pkg/kstatus, which reports Failed).
	// Present only while True.
	ConditionStalled = "Stalled"
	// ConditionReconciling: the engine is still converging the parent
	// (kstatus reports InProgress). Present only while True: it goes once
	// the parent is Ready or Stalled.
	ConditionReconciling = "Reconciling"
	// ConditionPaused: True while the parent carries AnnotationPaused
	// "true"; False (ReasonPauseValueIgnored) while it carries another
	// value, which does not pause; absent otherwise.
	ConditionPaused = "Paused"
)

// Condition reasons. Providers add their own (providers.Reason*), which
// appear as Synced's reason when a resource fails.
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
	// ReasonConflict: Synced while a write lost an optimistic-lock race;
	// the reconcile runs again once the cache has the newer object.
	ReasonConflict = "Conflict"
	// ReasonUnknownProvider: a template names a provider the engine lacks.
	ReasonUnknownProvider = "UnknownProvider"
	// ReasonDeleting: Ready while a deletion waits for dependents to go
	// first (the parent's own, or one a spec change prunes).
	ReasonDeleting = "Deleting"
	// ReasonDeletionBlocked: Synced while a dependent that must go first
	// is held by a finalizer that is not the garbage collector's.
	ReasonDeletionBlocked = "DeletionBlocked"
	// ReasonStatusTooLarge: the status the template renders is over the
	// apiserver's size limit.
	ReasonStatusTooLarge = "StatusTooLarge"
	// ReasonStatusFieldsDropped: the apiserver dropped status fields the
	// template renders, which the installed CRD does not declare.
	ReasonStatusFieldsDropped = "StatusFieldsDropped"
	// ReasonRevisionNotFound: the object is pinned to a template revision
	// that is not stored.
	ReasonRevisionNotFound = "RevisionNotFound"
	// ReasonReferenceNotFound: an object the template references does not
	// exist; nothing is created, updated or deleted until it does.
	ReasonReferenceNotFound = "ReferenceNotFound"
	// ReasonReferenceRefused: the template references an object its policy
	// does not let it read (another namespace, a cluster-scoped kind).
	ReasonReferenceRefused = "ReferenceRefused"
	// ReasonPaused: Paused True, and Stalled True, while the parent carries
	// AnnotationPaused; also the reason of the events.
	ReasonPaused = "Paused"
	// ReasonPauseValueIgnored: Paused False, and a Warning event, while
	// AnnotationPaused holds a value other than "true": it does not pause.
	ReasonPauseValueIgnored = "PauseValueIgnored"
	// ReasonResumed: the event when the annotation goes.
	ReasonResumed = "Resumed"
	// ReasonConnectionSecretDrifted: Synced while a connection Secret was
	// found changed by someone else (a key changed or removed, another
	// type) and is being put right.
	ReasonConnectionSecretDrifted = "ConnectionSecretDrifted"
	// ReasonClusterUnreachable: Synced while a workload cluster the
	// parent's children are in is registered but does not answer;
	// nothing there is created, changed or deleted until it does, and
	// the children elsewhere go on. Retried with backoff.
	ReasonClusterUnreachable = "ClusterUnreachable"
	// ReasonClusterUnknown: Synced while a workload cluster the parent's
	// children are in (or are to be put in) is not registered, or its
	// registration was removed: its children there are left as they are,
	// never deleted because of it.
	ReasonClusterUnknown = "ClusterUnknown"
	// ReasonConversionFailed: Stalled True on a parent stored in a version
	// that does not convert to its template's hub (written before the
	// engine's webhook refused such writes, or while it was down, or left
	// behind by a template change): the engine cannot read it as its
	// template does, so it evaluates, applies and prunes nothing for it
	// (its children are left as they are) until it is fixed in its stored
	// version; every other object of the kind is served.
	ReasonConversionFailed = "ConversionFailed"
)

// Reasons of the limits (render.Limits), on the Synced condition.
const (
	ReasonEvaluationTimeout = "EvaluationTimeout"
	ReasonTooManyChildren   = "TooManyChildren"
	ReasonRenderTooLarge    = "RenderTooLarge"
	// ReasonEvaluationBudgetExceeded: the object's evaluation ran past
	// the timeout before, and the evaluations that did so engine-wide
	// hold what they may (render.Budget): it is not evaluated now, and is
	// retried later.
	ReasonEvaluationBudgetExceeded = "EvaluationBudgetExceeded"
	// ReasonEvaluationMemoryExceeded: the object's evaluation, in an
	// evaluator process (package evaluator), held more than
	// --evaluator-memory and was stopped; it is not evaluated again until
	// its spec or the template changes.
	ReasonEvaluationMemoryExceeded = "EvaluationMemoryExceeded"
)

// ReasonEvaluationHeapExceeded is the reason of the Warning event put on
// each parent whose evaluation ran past the timeout when the engine's live
// heap passed the hard bar (--max-evaluation-heap-hard) and the engine
// exited to free it (render.HeapExceeded).
const ReasonEvaluationHeapExceeded = "EvaluationHeapExceeded"

// ReasonTemplateReloadFailed is the reason of the Warning event put on the
// parents of a kind whose template was edited into something that cannot
// be served. They keep being reconciled with the last good version.
const ReasonTemplateReloadFailed = "TemplateReloadFailed"

// ConditionsOf reads the conditions of a status (the object's status
// map); entries that are not conditions are dropped.
func ConditionsOf(status map[string]any) []metav1.Condition {
	raw, _ := status[StatusConditions].([]any)
	var out []metav1.Condition
	for _, item := range raw {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		if c, ok := conditionFrom(m); ok {
			out = append(out, c)
			continue
		}
		var c metav1.Condition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c); err == nil {
			out = append(out, c)
		}
	}
	return out
}

// conditionFrom reads a condition as the engine and the apiserver store
// it (strings, an int64 observedGeneration, an RFC 3339 time) without the
// converter's reflection, which encodes the time to JSON to decode it
// again; ok is false for anything else, which the converter reads. The
// result is the converter's: a time is parsed as metav1.Time decodes it.
func conditionFrom(m map[string]any) (c metav1.Condition, ok bool) {
	for k, v := range m {
		switch k {
		case "type", "status", "reason", "message":
			s, isString := v.(string)
			if !isString {
				return c, false
			}
			switch k {
			case "type":
				c.Type = s
			case "status":
				c.Status = metav1.ConditionStatus(s)
			case "reason":
				c.Reason = s
			default:
				c.Message = s
			}
		case "observedGeneration":
			g, isInt := v.(int64)
			if !isInt {
				return c, false
			}
			c.ObservedGeneration = g
		case "lastTransitionTime":
			s, isString := v.(string)
			if !isString {
				return c, false
			}
			t, err := time.Parse(time.RFC3339, s)
			if err != nil {
				return c, false
			}
			c.LastTransitionTime = metav1.NewTime(t.Local())
		default:
			return c, false
		}
	}
	return c, true
}

// ConditionValue is a condition as a JSON value, as the converter makes
// it (runtime.DefaultUnstructuredConverter.ToUnstructured), without its
// reflection.
func ConditionValue(c metav1.Condition) map[string]any {
	m := make(map[string]any, 6)
	m["type"] = c.Type
	m["status"] = string(c.Status)
	if c.ObservedGeneration != 0 {
		m["observedGeneration"] = c.ObservedGeneration
	}
	m["lastTransitionTime"] = c.LastTransitionTime.ToUnstructured()
	m["reason"] = c.Reason
	m["message"] = c.Message
	return m
}

// FindCondition returns the object's stored condition of a type, or nil.
func FindCondition(obj *unstructured.Unstructured, condType string) *metav1.Condition {
	stored, _, _ := unstructured.NestedMap(obj.Object, "status")
	return meta.FindStatusCondition(ConditionsOf(stored), condType)
}

// ConditionIs reports whether the object's condition of a type is stored
// with the status want.
func ConditionIs(obj *unstructured.Unstructured, condType string, want metav1.ConditionStatus) bool {
	c := FindCondition(obj, condType)
	return c != nil && c.Status == want
}
