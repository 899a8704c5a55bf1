package reconciler

import (
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/internal/jsoncmp"
)

// quietChange reports whether a status write from stored to next changes
// nothing that a person or a tool acts on, so that it may wait for the
// engine's pace of such writes (Options.QuietStatus) instead of going at
// once: the same conditions with the same status, reason and observed
// generation (their messages may differ), the same observedGeneration,
// lastHandledReconcileAt and template revision, and the same fields of
// the template; only condition messages, status.resources (the providers'
// details: a change that matters moves Ready) and engine fields the stored
// status does not have yet (written by an engine that did not write them)
// differ. A status the engine has not written before is never quiet.
//
// This is what an upgrade of the engine writes when the new build words a
// message differently or records a field the old one did not: every
// parent at once, at start, without it.
func quietChange(stored, next map[string]any) bool {
	if len(stored) == 0 || stored[contract.StatusConditions] == nil {
		return false
	}
	for k := range next {
		if !quietField(k, stored, next) {
			return false
		}
	}
	for k := range stored {
		if _, both := next[k]; !both && !quietField(k, stored, next) {
			return false
		}
	}
	return true
}

// quietField reports whether the status field k may differ between
// stored and next in a quiet change.
func quietField(k string, stored, next map[string]any) bool {
	switch k {
	case contract.StatusConditions:
		return sameConditionStates(stored, next)
	case contract.StatusResources:
		return true
	case contract.StatusTemplateRevision:
		_, had := stored[k]
		return !had || jsoncmp.Equal(stored[k], next[k])
	default: // observedGeneration, lastHandledReconcileAt, the template's
		return jsoncmp.Equal(stored[k], next[k])
	}
}

// sameConditionStates: the same condition types, each with the same
// status, reason and observed generation.
func sameConditionStates(stored, next map[string]any) bool {
	a, b := contract.ConditionsOf(stored), contract.ConditionsOf(next)
	if len(a) != len(b) {
		return false
	}
	for _, c := range a {
		d := meta.FindStatusCondition(b, c.Type)
		if d == nil || d.Status != c.Status || d.Reason != c.Reason || d.ObservedGeneration != c.ObservedGeneration {
			return false
		}
	}
	return true
}
