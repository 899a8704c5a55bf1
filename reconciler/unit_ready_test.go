package reconciler

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates"
)

// TestChildReady: a child's readiness is kstatus's Current.
func TestChildReady(t *testing.T) {
	deployment := func(status map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "web", "namespace": "ns", "generation": int64(2)},
			"spec":     map[string]any{"replicas": int64(2)},
		}}
		if status != nil {
			u.Object["status"] = status
		}
		return u
	}
	complete := func() map[string]any {
		return map[string]any{
			"observedGeneration": int64(2), "replicas": int64(2), "updatedReplicas": int64(2),
			"readyReplicas": int64(2), "availableReplicas": int64(2),
			"conditions": []any{
				map[string]any{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
				map[string]any{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
			},
		}
	}
	with := func(m map[string]any, k string, v any) map[string]any { m[k] = v; return m }
	widget := func(ready string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.com/v1", "kind": "Widget",
			"metadata": map[string]any{"name": "w", "namespace": "ns", "generation": int64(1)},
			"status": map[string]any{"observedGeneration": int64(1), "conditions": []any{
				map[string]any{"type": "Ready", "status": ready, "reason": "Checked", "message": "checked"},
			}},
		}}
	}
	for _, tc := range []struct {
		name  string
		obj   *unstructured.Unstructured
		ready bool
	}{
		{"Deployment rolled out", deployment(complete()), true},
		{"Deployment mid-rollout", deployment(with(complete(), "updatedReplicas", int64(1))), false},
		{"Deployment with a replica not ready", deployment(with(complete(), "readyReplicas", int64(1))), false},
		{"Deployment observedGeneration behind", deployment(with(complete(), "observedGeneration", int64(1))), false},
		{"Deployment without status", deployment(nil), false},
		{"ConfigMap, ready on existence", &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "namespace": "ns"},
			"data": map[string]any{"k": "v"}}}, true},
		{"Ready=False condition", widget("False"), false},
		{"Ready=True condition", widget("True"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.ready, childReady(tc.obj))
		})
	}
}

// TestTemplateReadyReason: the reason and message of the template's
// ready are the Ready condition's, when the verdict is the template's.
func TestTemplateReadyReason(t *testing.T) {
	no, yes := false, true
	tests := []struct {
		name string
		ok   bool
		res  templates.Result
		want condition
	}{
		{"a bare false", false, templates.Result{Ready: &no},
			condition{status: metav1.ConditionFalse, reason: contract.ReasonTemplateNotReady, message: "the template reports not ready"}},
		{"false with a reason", false, templates.Result{Ready: &no, ReadyReason: "NoQuorum", ReadyMessage: "2 of 3 members are up"},
			condition{status: metav1.ConditionFalse, reason: "NoQuorum", message: "2 of 3 members are up"}},
		{"true with a message", true, templates.Result{Ready: &yes, ReadyMessage: "3 of 3 members are up"},
			condition{status: metav1.ConditionTrue, reason: contract.ReasonReady, message: "3 of 3 members are up"}},
		{"true, but a resource waits", false, templates.Result{Ready: &yes, ReadyMessage: "3 of 3 members are up"},
			condition{status: metav1.ConditionFalse, reason: contract.ReasonTemplateNotReady, message: "the template reports not ready"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, templateReady(tc.ok, &tc.res))
		})
	}
}
