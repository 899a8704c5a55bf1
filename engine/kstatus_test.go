package engine_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
)

// TestKstatusTellsFailingFromProgressing reads real parents with kstatus
// itself (sigs.k8s.io/cli-utils/pkg/kstatus/status.Compute, what Flux's
// health checks and kubectl-style waiting use): InProgress while the
// engine converges (a child not ready yet, a referenced object missing:
// retryable, never Failed), Current once Ready, Failed with the reason on
// a problem only a person can clear (a child that belongs to someone
// else).
func TestKstatusTellsFailingFromProgressing(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	ns := namespace(t)
	compute := func(obj *unstructured.Unstructured) func(ctx context.Context) (*kstatus.Result, error) {
		return func(ctx context.Context) (*kstatus.Result, error) {
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(obj.GroupVersionKind())
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), live); err != nil {
				return nil, err
			}
			return kstatus.Compute(live)
		}
	}
	statusIs := func(obj *unstructured.Unstructured, want kstatus.Status, reason string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			if c, err := condition(ctx, obj, contract.ConditionSynced); err != nil || c == nil {
				return false, err // not reconciled yet: kstatus says InProgress for nothing
			}
			res, err := compute(obj)(ctx)
			if err != nil {
				return false, err
			}
			if res.Status == kstatus.FailedStatus && want != kstatus.FailedStatus {
				t.Fatalf("%s is Failed on a retryable state: %s", obj.GetName(), res.Message)
			}
			if res.Status != want {
				return false, nil
			}
			stalled, err := condition(ctx, obj, contract.ConditionStalled)
			if want != kstatus.FailedStatus {
				return err == nil && stalled == nil, err // only a True one is stored
			}
			return err == nil && stalled != nil && stalled.Reason == reason, err
		}
	}

	// Converging: the Deployment is not ready (the bare control plane has
	// no controller for it), then it is.
	w := parent(waiterGVK, ns, "web", map[string]any{"expose": false})
	require.NoError(t, k8s.Create(ctx, w))
	eventually(t, "InProgress while the Deployment is not ready", statusIs(w, kstatus.InProgressStatus, ""))
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(waiterGVK)
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(w), live))
	rec := contract.FindCondition(live, contract.ConditionReconciling)
	require.NotNil(t, rec)
	assert.Equal(t, metav1.ConditionTrue, rec.Status)
	assert.Equal(t, live.GetGeneration(), rec.ObservedGeneration)
	markReady(t, ns, "web", 1)
	eventually(t, "Current once Ready", statusIs(w, kstatus.CurrentStatus, ""))
	gone, err := condition(ctx, w, contract.ConditionReconciling)
	require.NoError(t, err)
	assert.Nil(t, gone, "Reconciling goes once Ready")

	// Waiting for a referenced ConfigMap: retryable, InProgress.
	c := parent(consumerGVK, ns, "waits", map[string]any{"settings": "not-yet"})
	require.NoError(t, k8s.Create(ctx, c))
	eventually(t, "InProgress while a reference is missing", statusIs(c, kstatus.InProgressStatus, ""))

	// A Deployment of the same name that belongs to no parent: only a
	// person can settle it.
	foreign := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "taken"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "taken"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
	}
	require.NoError(t, k8s.Create(ctx, foreign))
	conflict := parent(waiterGVK, ns, "taken", map[string]any{"expose": false})
	require.NoError(t, k8s.Create(ctx, conflict))
	eventually(t, "Failed on ChildConflict", statusIs(conflict, kstatus.FailedStatus, contract.ReasonChildConflict))
	res, err := compute(conflict)(ctx)
	require.NoError(t, err)
	synced, err := condition(ctx, conflict, contract.ConditionSynced)
	require.NoError(t, err)
	assert.Equal(t, synced.Message, res.Message, "kstatus shows the engine's message")
	rec, err = condition(ctx, conflict, contract.ConditionReconciling)
	require.NoError(t, err)
	assert.Nil(t, rec, "no Reconciling while Stalled")
}
