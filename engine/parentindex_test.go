package engine_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/engine"
)

// TestParentIndexOnACache: on a real cache, the parent-uid index finds a
// parent's children across namespaces (copies, or the cache's own when
// shared), and a List by the field of that name is an error, not an empty
// answer: the index is the informer's, not controller-runtime's.
func TestParentIndexOnACache(t *testing.T) {
	controlPlane(t)
	ctx, cancel := context.WithCancel(context.Background())
	var caches sync.WaitGroup // the caches stop with ctx
	defer caches.Wait()
	defer cancel()
	a := namespace(t)
	b := a + "-b"
	require.NoError(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: b}}))
	for i, ns := range []string{a, b, a} {
		uid := "parent-1"
		if i == 2 {
			uid = "parent-2"
		}
		require.NoError(t, k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c" + string(rune('0'+i)),
			Labels: map[string]string{contract.LabelParentUID: uid}}}))
	}
	c, err := cache.New(cfg, cache.Options{})
	require.NoError(t, err)
	caches.Go(func() { _ = c.Start(ctx) })
	require.NoError(t, engine.AddParentUIDIndex(ctx, c, &corev1.ConfigMap{}))
	if !c.WaitForCacheSync(ctx) { // the index was added before the cache started
		list := &corev1.ConfigMapList{}
		require.Error(t, engine.ListByParentUID(ctx, c, &corev1.ConfigMap{}, list, "parent-1", true), "not synced: an error, not nothing")
		t.Fatal("the cache did not sync")
	}

	for _, shared := range []bool{true, false} {
		list := &corev1.ConfigMapList{}
		require.NoError(t, engine.ListByParentUID(ctx, c, &corev1.ConfigMap{}, list, "parent-1", shared))
		names := []string{}
		for _, cm := range list.Items {
			names = append(names, cm.Namespace+"/"+cm.Name)
		}
		require.ElementsMatch(t, []string{a + "/c0", b + "/c1"}, names)
	}
	err = c.List(ctx, &corev1.ConfigMapList{}, client.MatchingFields{engine.IndexParentUID: "parent-1"})
	require.Error(t, err)
	t.Logf("a List by the field: %v", err)

	// A cache of one namespace (--namespace: an informer per namespace)
	// falls back to controller-runtime's field index, and finds the same.
	nc, err := cache.New(cfg, cache.Options{DefaultNamespaces: map[string]cache.Config{a: {}}})
	require.NoError(t, err)
	caches.Go(func() { _ = nc.Start(ctx) })
	require.NoError(t, engine.AddParentUIDIndex(ctx, nc, &corev1.ConfigMap{}))
	require.True(t, nc.WaitForCacheSync(ctx))
	for _, shared := range []bool{true, false} {
		list := &corev1.ConfigMapList{}
		require.NoError(t, engine.ListByParentUID(ctx, nc, &corev1.ConfigMap{}, list, "parent-1", shared))
		require.Len(t, list.Items, 1)
		require.Equal(t, a+"/c0", list.Items[0].Namespace+"/"+list.Items[0].Name)
	}
}
