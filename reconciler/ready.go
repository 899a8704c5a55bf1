package reconciler

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

// setReady decides Ready: the template's own ready field when it has one,
// else every desired child exists and is ready, and so is every resource.
func (s *status) setReady(eval *evaluation, live *render.LiveChildren) {
	if !s.synced.ok() {
		s.ready = condition{status: metav1.ConditionFalse, reason: contract.ReasonNotSynced, message: "not synced: " + s.synced.reason}
		return
	}
	waiting := waitingResources(s.resourcesSeen())
	if ready := eval.result.Ready; ready != nil {
		if *ready && len(waiting) == 0 {
			s.ready = condition{status: metav1.ConditionTrue, reason: contract.ReasonReady, message: "the template reports ready"}
		} else {
			s.ready = condition{status: metav1.ConditionFalse, reason: contract.ReasonTemplateNotReady, message: "the template reports not ready"}
		}
		return
	}
	// The message names what is not ready, not why: a child going from
	// "missing" to "0 of 1 replicas" to ready changes it once, not thrice,
	// so readiness progress costs no extra status writes.
	for _, d := range eval.children {
		if c := live.Get(d); c == nil || !childReady(c) {
			waiting = append(waiting, fmt.Sprintf("%s %s", d.GetKind(), d.GetName()))
		}
	}
	// Then the steps after those: children the template holds back until
	// what they read exists, and deletions held until their dependents go.
	var steps []string
	if len(waiting) > 0 {
		steps = append(steps, "waiting for "+strings.Join(waiting, ", "))
	}
	steps = append(append(steps, heldBack(eval)...), s.waits...)
	if len(steps) > 0 {
		s.ready = condition{status: metav1.ConditionFalse, reason: contract.ReasonWaiting, message: SafeMessage(strings.Join(steps, "; "))}
		return
	}
	s.ready = condition{status: metav1.ConditionTrue, reason: contract.ReasonReady, message: "all children are ready"}
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

// heldBack names the children of the template's graph that it did not
// produce while something they read through observed is desired but does
// not exist yet: "child app waits for assets". Ordered creation needs
// nothing else (the template cannot produce them before); this only says
// so. A child whose dependency is not desired either is left out by the
// spec, not waiting.
func heldBack(eval *evaluation) []string {
	if eval.graph == nil {
		return nil
	}
	produced, desired := map[string]bool{}, map[string]bool{}
	for _, c := range eval.result.Children {
		produced[c.Name], desired[c.Name] = true, true
	}
	for _, r := range eval.result.Resources {
		desired[r.Name] = true
	}
	var out []string
	for _, n := range eval.graph.Nodes {
		if n.Kind != templates.ChildNode || produced[n.Name] {
			continue
		}
		var missing []string
		for _, d := range n.DependsOn {
			if _, ok := eval.observed[d.Name]; !ok && desired[d.Name] && d.Via == templates.ViaObserved && !slices.Contains(missing, d.Name) {
				missing = append(missing, d.Name)
			}
		}
		if len(missing) > 0 {
			out = append(out, fmt.Sprintf("child %s waits for %s", n.Name, strings.Join(missing, ", ")))
		}
	}
	return out
}
