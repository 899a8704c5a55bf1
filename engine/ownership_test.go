package engine_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
)

// forgedMeta is what a user who may only create objects in their own
// namespace can write to pass an object off as a parent's child: the
// engine's labels and annotation, naming a parent they do not own.
func forgedMeta(ns, name string, p *unstructured.Unstructured, child string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels: map[string]string{
			contract.LabelManagedBy: contract.ManagedByValue,
			contract.LabelParentUID: string(p.GetUID()),
			contract.LabelChild:     child,
		},
		Annotations: map[string]string{contract.AnnotationParent: contract.ParentRef(p)},
	}
}

// TestForgedLabelsProveNothing: an object carrying the engine's labels for
// someone else's parent is never adopted, pruned or deleted with it, in the
// parent's namespace or in another one. (The engine used to match children
// by label alone and deleted such objects on every reconcile.)
func TestForgedLabelsProveNothing(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()

	t.Run("same namespace", func(t *testing.T) {
		ns := namespace(t)
		mk := parent(myKindGVK, ns, "victim", map[string]any{"deploymentName": "victim"})
		require.NoError(t, k8s.Create(ctx, mk))
		var real *appsv1.Deployment
		eventually(t, "the real Deployment", func(ctx context.Context) (bool, error) {
			var err error
			real, err = getDeployment(ctx, ns, "victim")
			return err == nil, err
		})
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(mk), mk))

		forged := &appsv1.Deployment{ObjectMeta: forgedMeta(ns, "forged", mk, "deployment"), Spec: real.Spec}
		seven := int32(7)
		forged.Spec.Replicas = &seven
		require.NoError(t, k8s.Create(ctx, forged))

		// A reconcile that runs after the forged object is in the cache:
		// the real child deleted is recreated.
		require.NoError(t, k8s.Delete(ctx, real))
		eventually(t, "the real Deployment recreated", func(ctx context.Context) (bool, error) {
			d, err := getDeployment(ctx, ns, "victim")
			return err == nil && d.UID != real.UID, err
		})
		cur, err := getDeployment(ctx, ns, "forged")
		require.NoError(t, err, "the forged Deployment is not pruned")
		assert.Equal(t, forged.ResourceVersion, cur.ResourceVersion, "and not written to")
		assert.Equal(t, int32(7), *cur.Spec.Replicas)
	})

	t.Run("another namespace", func(t *testing.T) {
		ns := namespace(t)
		tenant := parent(tenantGVK, ns, "globex", map[string]any{})
		require.NoError(t, k8s.Create(ctx, tenant))
		var settings corev1.ConfigMap
		eventually(t, "the tenant's ConfigMap", func(ctx context.Context) (bool, error) {
			return true, k8s.Get(ctx, client.ObjectKey{Namespace: "tenant-globex", Name: "settings"}, &settings)
		})
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(tenant), tenant))
		var inv []string
		require.NoError(t, json.Unmarshal([]byte(tenant.GetAnnotations()[contract.AnnotationInventory]), &inv))
		assert.Equal(t, []string{"ConfigMap/tenant-globex/settings", "Namespace//tenant-globex"}, inv,
			"what the parent owns outside its namespace is recorded on it")

		other := ns + "-b"
		require.NoError(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}))
		forged := &corev1.ConfigMap{ObjectMeta: forgedMeta(other, "forged", tenant, "settings"), Data: map[string]string{"owner": "someone else"}}
		require.NoError(t, k8s.Create(ctx, forged))

		require.NoError(t, k8s.Delete(ctx, &settings))
		eventually(t, "the tenant's ConfigMap recreated", func(ctx context.Context) (bool, error) {
			var cm corev1.ConfigMap
			err := k8s.Get(ctx, client.ObjectKey{Namespace: "tenant-globex", Name: "settings"}, &cm)
			return err == nil && cm.UID != settings.UID, err
		})
		cur := &corev1.ConfigMap{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(forged), cur), "the forged ConfigMap is not pruned")
		assert.Equal(t, forged.ResourceVersion, cur.ResourceVersion)

		require.NoError(t, k8s.Delete(ctx, tenant))
		eventually(t, "the tenant gone with its own children", func(ctx context.Context) (bool, error) {
			err := k8s.Get(ctx, client.ObjectKey{Namespace: "tenant-globex", Name: "settings"}, &corev1.ConfigMap{})
			if !apierrors.IsNotFound(err) {
				return false, nil
			}
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(tenant), &unstructured.Unstructured{Object: map[string]any{"apiVersion": tenant.GetAPIVersion(), "kind": tenant.GetKind()}})), nil
		})
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(forged), cur), "the forged ConfigMap survives the parent's deletion")
		assert.Equal(t, forged.ResourceVersion, cur.ResourceVersion)
	})
}
