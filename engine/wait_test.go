package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
)

var waiterGVK = schema.GroupVersionKind{Group: "test.cuengine.dev", Version: "v1", Kind: "Waiter"}

// TestServiceWaitsForReadyDeployment, on a real apiserver where the test
// plays the Deployment controller (the bare control plane has none): the
// Service that depends on a Deployment with a readyWhen is created only
// after the Deployment's first readiness; during a rollout (not ready for
// a while) it stays, its UID unchanged, and so does the ConfigMap the
// template produces only while the Deployment is ready; a spec change
// that drops the Service prunes it.
func TestServiceWaitsForReadyDeployment(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	ns := namespace(t)
	w := parent(waiterGVK, ns, "web", map[string]any{"expose": true})
	require.NoError(t, k8s.Create(ctx, w))
	readyMessage := func(want string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			c, err := condition(ctx, w, contract.ConditionReady)
			return err == nil && c != nil && strings.Contains(c.Message, want), err
		}
	}

	eventually(t, "the Service waiting", readyMessage("child svc waits for deployment to be ready"))
	svc := &corev1.Service{}
	key := client.ObjectKey{Namespace: ns, Name: "web"}
	assert.True(t, apierrors.IsNotFound(k8s.Get(ctx, key, svc)), "no Service before the Deployment is ready")

	markReady(t, ns, "web", 1)
	eventually(t, "the Service", func(ctx context.Context) (bool, error) { return true, k8s.Get(ctx, key, svc) })
	uid := svc.UID
	eventually(t, "the ConfigMap", func(ctx context.Context) (bool, error) {
		return true, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-ready"}, &corev1.ConfigMap{})
	})
	eventually(t, "Ready", readyMessage("all children are ready"))

	// A rollout: the Deployment is not ready for a while.
	d, err := getDeployment(ctx, ns, "web")
	require.NoError(t, err)
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 0, ReadyReplicas: 0}
	require.NoError(t, k8s.Status().Update(ctx, d))
	eventually(t, "the ConfigMap kept, and said so", readyMessage("child marker kept: its condition reads observed.deployment, which changed; it goes when the spec or template changes"))
	require.NoError(t, k8s.Get(ctx, key, svc))
	assert.Equal(t, uid, svc.UID, "the Service stays through the rollout")
	assert.Nil(t, svc.DeletionTimestamp)
	cm := &corev1.ConfigMap{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-ready"}, cm))
	assert.Nil(t, cm.DeletionTimestamp)

	markReady(t, ns, "web", 1)
	eventually(t, "Ready again", readyMessage("all children are ready"))
	require.NoError(t, k8s.Get(ctx, key, svc))
	assert.Equal(t, uid, svc.UID)

	// The spec drops the Service: it is pruned (foreground: the bare
	// control plane has no garbage collector to finish it).
	require.NoError(t, k8s.Patch(ctx, w, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"expose":false}}`))))
	eventually(t, "the Service pruned", func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, key, svc)
		return apierrors.IsNotFound(err) || (err == nil && svc.DeletionTimestamp != nil), client.IgnoreNotFound(err)
	})
}
