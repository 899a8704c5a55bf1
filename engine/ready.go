package engine

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// setReady decides Ready: the template's own ready field when it has one,
// else every desired child exists and is ready, and so is every resource.
func (s *status) setReady(eval *evaluation, live *liveChildren) {
	if !s.synced.ok() {
		s.ready = condition{status: metav1.ConditionFalse, reason: ReasonNotSynced, message: "not synced: " + s.synced.reason}
		return
	}
	waiting := waitingResources(s.resourcesSeen())
	if ready := eval.result.Ready; ready != nil {
		if *ready && len(waiting) == 0 {
			s.ready = condition{status: metav1.ConditionTrue, reason: ReasonReady, message: "the template reports ready"}
		} else {
			s.ready = condition{status: metav1.ConditionFalse, reason: ReasonTemplateNotReady, message: "the template reports not ready"}
		}
		return
	}
	// The message names what is not ready, not why: a child going from
	// "missing" to "0 of 1 replicas" to ready changes it once, not thrice,
	// so readiness progress costs no extra status writes.
	for _, d := range eval.children {
		if c := live.get(d); c == nil || !childReady(c) {
			waiting = append(waiting, fmt.Sprintf("%s %s", d.GetKind(), d.GetName()))
		}
	}
	if len(waiting) > 0 {
		s.ready = condition{status: metav1.ConditionFalse, reason: ReasonWaiting, message: safeMessage("waiting for " + strings.Join(waiting, ", "))}
		return
	}
	s.ready = condition{status: metav1.ConditionTrue, reason: ReasonReady, message: "all children are ready"}
}

// childReady judges a live child by kstatus, the rules Flux, kpt and
// cli-utils share: Current once its controller has observed the latest spec
// and the kind's own signals agree (a Deployment's updated, ready and
// available replicas and its Progressing condition, a Job's completion, a
// PVC bound, a Ready condition on anything else that has one). An object
// without any signal is ready once it exists.
func childReady(obj *unstructured.Unstructured) bool {
	res, err := kstatus.Compute(obj)
	return err == nil && res.Status == kstatus.CurrentStatus
}
