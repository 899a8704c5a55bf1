package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
)

var (
	tenantGVK = schema.GroupVersionKind{Group: "test.cuengine.dev", Version: "v1", Kind: "Tenant"}
	leakyGVK  = schema.GroupVersionKind{Group: "test.cuengine.dev", Version: "v1", Kind: "Leaky"}
)

// TestChildrenOutsideTheNamespaceNeedAPolicy: without a policy the engine
// refuses, and applies the rest; with one it writes them, and deletes them
// (through its finalizer) when the parent goes.
func TestChildrenOutsideTheNamespaceNeedAPolicy(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	ns := namespace(t)

	leaky := parent(leakyGVK, ns, "leaky", map[string]any{})
	require.NoError(t, k8s.Create(ctx, leaky))
	eventually(t, "Synced=False ChildRefused naming both", func(ctx context.Context) (bool, error) {
		c, err := condition(ctx, leaky, contract.ConditionSynced)
		return c != nil && c.Reason == contract.ReasonChildRefused &&
			strings.Contains(c.Message, `namespace "default"`) && strings.Contains(c.Message, "cluster-scoped"), err
	})
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "local"}, &corev1.ConfigMap{}), "the allowed child is applied")
	err := k8s.Get(ctx, client.ObjectKey{Namespace: "default", Name: "elsewhere"}, &corev1.ConfigMap{})
	assert.True(t, apierrors.IsNotFound(err))
	err = k8s.Get(ctx, client.ObjectKey{Name: "leaky"}, &rbacv1.ClusterRole{})
	assert.True(t, apierrors.IsNotFound(err))

	tenant := parent(tenantGVK, ns, "acme", map[string]any{})
	require.NoError(t, k8s.Create(ctx, tenant))
	eventually(t, "the tenant's namespace and ConfigMap", func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKey{Name: "tenant-acme"}, &corev1.Namespace{}); err != nil {
			return false, err
		}
		return true, k8s.Get(ctx, client.ObjectKey{Namespace: "tenant-acme", Name: "settings"}, &corev1.ConfigMap{})
	})
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(tenantGVK)
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(tenant), cur))
	assert.Contains(t, cur.GetFinalizers(), contract.Finalizer)

	require.NoError(t, k8s.Delete(ctx, tenant))
	eventually(t, "the children deleted, then the parent", func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: "tenant-acme", Name: "settings"}, &corev1.ConfigMap{})
		if !apierrors.IsNotFound(err) {
			return false, nil
		}
		err = k8s.Get(ctx, client.ObjectKeyFromObject(tenant), cur)
		return apierrors.IsNotFound(err), nil
	})
	ns2 := &corev1.Namespace{}
	err = k8s.Get(ctx, client.ObjectKey{Name: "tenant-acme"}, ns2)
	// envtest has no namespace controller: a deleted namespace stays Terminating.
	assert.True(t, apierrors.IsNotFound(err) || ns2.DeletionTimestamp != nil, "the namespace is being deleted")
}
