package engine

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// childReady judges whether a live child is ready, by its kind's usual
// rules: workloads when their ready replicas match and their controller has
// seen the latest spec; Jobs when complete; PVCs when bound; anything with
// a Ready or Available condition by that condition; other objects when
// they exist.
func childReady(obj *unstructured.Unstructured) (bool, string) {
	gen := obj.GetGeneration()
	observedGen, hasObserved, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
	if hasObserved && observedGen < gen {
		return false, "its controller has not observed the latest spec yet"
	}
	switch obj.GroupVersionKind().GroupKind().String() {
	case "Deployment.apps", "StatefulSet.apps", "ReplicaSet.apps":
		want, found, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas")
		if !found {
			want = 1
		}
		ready, _, _ := unstructured.NestedInt64(obj.Object, "status", "readyReplicas")
		if !hasObserved {
			return false, "not observed by its controller yet"
		}
		if ready < want {
			return false, fmt.Sprintf("%d of %d replicas ready", ready, want)
		}
		return true, ""
	case "DaemonSet.apps":
		want, _, _ := unstructured.NestedInt64(obj.Object, "status", "desiredNumberScheduled")
		ready, _, _ := unstructured.NestedInt64(obj.Object, "status", "numberReady")
		if !hasObserved || ready < want {
			return false, fmt.Sprintf("%d of %d pods ready", ready, want)
		}
		return true, ""
	case "Job.batch":
		if conditionTrue(obj, "Complete") {
			return true, ""
		}
		return false, "not complete"
	case "PersistentVolumeClaim":
		if phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase"); phase != "Bound" {
			return false, "not bound"
		}
		return true, ""
	}
	for _, t := range []string{"Ready", "Available"} {
		if status, found := conditionStatus(obj, t); found {
			if status == "True" {
				return true, ""
			}
			return false, t + " is " + status
		}
	}
	return true, ""
}

func conditionTrue(obj *unstructured.Unstructured, condType string) bool {
	status, found := conditionStatus(obj, condType)
	return found && status == "True"
}

func conditionStatus(obj *unstructured.Unstructured, condType string) (string, bool) {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == condType {
			s, _ := m["status"].(string)
			return s, true
		}
	}
	return "", false
}
