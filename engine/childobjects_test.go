package engine_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestBuiltInChildrenAreCachedTyped: the child cache holds a Deployment as
// *appsv1.Deployment (read in protobuf), without its managed fields, and a
// template reading the child's status still sees it.
func TestBuiltInChildrenAreCachedTyped(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	ns := namespace(t)
	mk := parent(myKindGVK, ns, "typed", map[string]any{"deploymentName": "typed", "replicas": 2})
	require.NoError(t, k8s.Create(ctx, mk))
	informer, err := sharedEngine.ChildCache().GetInformer(ctx, &appsv1.Deployment{})
	require.NoError(t, err)
	store := informer.(toolscache.SharedIndexInformer).GetStore()
	var cached any
	eventually(t, "the Deployment in the child cache", func(context.Context) (bool, error) {
		var ok bool
		cached, ok, err = store.GetByKey(ns + "/typed")
		return ok, err
	})
	// The engine has started (it made the Deployment): the apiserver is
	// no newer than its API types, so built-in kinds are typed.
	require.IsType(t, &appsv1.Deployment{}, sharedEngine.ChildObject(appsv1.SchemeGroupVersion.WithKind("Deployment")))
	d, ok := cached.(*appsv1.Deployment)
	require.True(t, ok, "cached as %T", cached)
	assert.Empty(t, d.ManagedFields, "managed fields are stripped in the cache")
	assert.Equal(t, int32(2), *d.Spec.Replicas)

	markReady(t, ns, "typed", 2)
	eventually(t, "the parent's readyReplicas from the child's status", func(ctx context.Context) (bool, error) {
		n, err := readyReplicas(ctx, mk)
		return n == 2, err
	})
}

// TestCustomResourceChildIsReadUnstructured: a child of a kind served from
// a CRD (a Portal's Website) is cached unstructured, and the template
// reading its status sees it.
func TestCustomResourceChildIsReadUnstructured(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	ns := namespace(t)
	portal := parent(portalGVK, ns, "docs", map[string]any{"image": "nginx"})
	require.NoError(t, k8s.Create(ctx, portal))
	eventually(t, "the Portal's status from its Website's", func(ctx context.Context) (bool, error) {
		cur := &unstructured.Unstructured{}
		cur.SetGroupVersionKind(portalGVK)
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(portal), cur); err != nil {
			return false, err
		}
		url, _, _ := unstructured.NestedString(cur.Object, "status", "siteURL")
		return url == "http://docs.example.test", nil
	})
	require.IsType(t, &unstructured.Unstructured{}, sharedEngine.ChildObject(websiteGVK))
	site := &unstructured.Unstructured{}
	site.SetGroupVersionKind(websiteGVK)
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "docs"}, site))
	ref := site.GetOwnerReferences()
	require.Len(t, ref, 1)
	assert.Equal(t, "Portal", ref[0].Kind)
	// The Website, a parent of its own, has its children too.
	eventually(t, "the Website's Deployment", func(ctx context.Context) (bool, error) {
		_, err := getDeployment(ctx, ns, "docs")
		return err == nil, err
	})
}
