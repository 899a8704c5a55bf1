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
	keys := map[string]bool{}
	for k := range stored {
		keys[k] = true
	}
	for k := range next {
		keys[k] = true
	}
	for k := range keys {
		switch k {
		case contract.StatusConditions:
			if !sameConditionStates(stored, next) {
				return false
			}
		case contract.StatusResources:
		case contract.StatusTemplateRevision:
			if _, had := stored[k]; had && !jsoncmp.Equal(stored[k], next[k]) {
				return false
			}
		default: // observedGeneration, lastHandledReconcileAt, the template's
			if !jsoncmp.Equal(stored[k], next[k]) {
				return false
			}
		}
	}
	return true
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
