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
	"github.com/cuengine/engine/templates/graph"
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
		s.ready = templateReady(*ready && len(waiting) == 0, eval.result)
		s.ready.message = SafeMessage(strings.Join(append([]string{s.ready.message}, s.kept...), "; "))
		return
	}
	// The message names what is not ready, not why: a child going from
	// "missing" to "0 of 1 replicas" to ready changes it once, not thrice,
	// so readiness progress costs no extra status writes.
	readyWhen := readyWhenByName(eval)
	for _, d := range eval.children {
		c, rw := live.Get(d), readyWhen[localName(d)]
		switch {
		case c == nil:
			waiting = append(waiting, readyName(d))
		case rw == nil:
			if !childReady(c) {
				waiting = append(waiting, readyName(d))
			}
		case rw.Ready:
		case rw.Unknown != "":
			waiting = append(waiting, fmt.Sprintf("%s (readyWhen not known yet: %s)", readyName(d), rw.Unknown))
		default:
			waiting = append(waiting, fmt.Sprintf("%s (readyWhen is false)", readyName(d)))
		}
	}
	// Then the steps after those: children the template holds back until
	// what they read exists, children the engine holds back until what
	// they depend on is ready, and deletions held until their dependents
	// go.
	var steps []string
	if len(waiting) > 0 {
		steps = append(steps, "waiting for "+strings.Join(waiting, ", "))
	}
	steps = append(append(append(steps, heldBack(eval)...), eval.waits...), s.waits...)
	if len(steps) > 0 {
		s.ready = condition{status: metav1.ConditionFalse, reason: contract.ReasonWaiting, message: SafeMessage(strings.Join(append(steps, s.kept...), "; "))}
		return
	}
	// Where the children in workload clusters are, which the parent's
	// status says nowhere else (remote.go).
	msg := append([]string{"all children are ready"}, remotePlaces(eval.children)...)
	s.ready = condition{status: metav1.ConditionTrue, reason: contract.ReasonReady, message: SafeMessage(strings.Join(append(msg, s.kept...), "; "))}
}

// templateReady is the Ready condition of a template's own ready, with
// the reason and message it gives (templates.Result.ReadyReason).
func templateReady(ok bool, res *templates.Result) condition {
	c := condition{status: metav1.ConditionTrue, reason: contract.ReasonReady, message: "the template reports ready"}
	if !ok {
		c = condition{status: metav1.ConditionFalse, reason: contract.ReasonTemplateNotReady, message: "the template reports not ready"}
	}
	if res.ReadyReason != "" && ok == *res.Ready {
		c.reason = res.ReadyReason
	}
	if res.ReadyMessage != "" && ok == *res.Ready {
		c.message = res.ReadyMessage
	}
	return c
}

// readyWhenByName maps the local name of each child with a readyWhen to
// what it says.
func readyWhenByName(eval *evaluation) map[string]*templates.ChildReadiness {
	out := map[string]*templates.ChildReadiness{}
	for _, c := range eval.result.Children {
		if c.ReadyWhen != nil {
			out[c.Name] = c.ReadyWhen
		}
	}
	return out
}

// waitForReady holds back the children that do not exist yet and depend
// (the template's graph) on a child with a readyWhen that does not exist
// or is not ready: "create after X is ready". A child that exists is
// applied whatever its dependencies say, so it is never removed or frozen
// because one became unready. A dependency without a readyWhen holds
// nothing back, as before readyWhen existed.
func waitForReady(eval *evaluation, live *render.LiveChildren) *evaluation {
	readyWhen := readyWhenByName(eval)
	if len(readyWhen) == 0 {
		return eval
	}
	desired := make(map[string]*unstructured.Unstructured, len(eval.children))
	for _, d := range eval.children {
		desired[localName(d)] = d
	}
	dependsOn := make(map[string][]string, len(eval.result.Children))
	for _, c := range eval.result.Children {
		dependsOn[c.Name] = c.DependsOn
	}
	var apply []*unstructured.Unstructured
	for _, d := range eval.children {
		var on []string
		if live.Get(d) == nil {
			for _, dep := range dependsOn[localName(d)] {
				rw, ok := readyWhen[dep]
				if !ok {
					continue
				}
				if x := desired[dep]; x == nil || live.Get(x) == nil || !rw.Ready {
					on = append(on, dep)
				}
			}
		}
		if len(on) == 0 {
			apply = append(apply, d)
			continue
		}
		eval.held = append(eval.held, d)
		eval.waits = append(eval.waits, fmt.Sprintf("child %s waits for %s to be ready", localName(d), strings.Join(on, ", ")))
	}
	eval.children = apply
	return eval
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
		if n.Kind != graph.ChildNode || produced[n.Name] {
			continue
		}
		var missing []string
		for _, d := range n.DependsOn {
			if _, ok := eval.observed[d.Name]; !ok && desired[d.Name] && d.Via == graph.ViaObserved && !slices.Contains(missing, d.Name) {
				missing = append(missing, d.Name)
			}
		}
		if len(missing) > 0 {
			out = append(out, fmt.Sprintf("child %s waits for %s", n.Name, strings.Join(missing, ", ")))
		}
	}
	return out
}
