package engine

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/cuengine/engine/contract"
)

// TestParentIndexKeysEachChildOnce: the parent-uid index keys a child by
// its parent's uid alone, and holds about half of what the same index
// costs keyed as controller-runtime's IndexField keys it (the value with
// and without the object's namespace).
func TestParentIndexKeysEachChildOnce(t *testing.T) {
	child := func(i int) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("c-%d", i),
			Labels: map[string]string{contract.LabelParentUID: fmt.Sprintf("0d4c2b7e-4a1f-4a9e-9a43-2b1e7c6f%04d", i)}}}
	}
	keys, err := parentUIDOf(child(7))
	require.NoError(t, err)
	require.Equal(t, []string{"0d4c2b7e-4a1f-4a9e-9a43-2b1e7c6f0007"}, keys)
	keys, err = parentUIDOf(&corev1.ConfigMap{})
	require.NoError(t, err)
	require.Empty(t, keys)

	controllerRuntimeKeys := func(obj any) ([]string, error) { // its indexByField
		cm := obj.(*corev1.ConfigMap)
		uid := cm.Labels[contract.LabelParentUID]
		return []string{cm.Namespace + "/" + uid, "__all_namespaces/" + uid}, nil
	}
	const n = 10000
	objs := make([]*corev1.ConfigMap, n)
	for i := range objs {
		objs[i] = child(i)
	}
	cost := func(f toolscache.IndexFunc) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		ix := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{indexParentUID: f})
		for _, o := range objs {
			require.NoError(t, ix.Add(o))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(ix)
		return (after.HeapAlloc - before.HeapAlloc) / n
	}
	once, twice := cost(parentUIDOf), cost(controllerRuntimeKeys)
	t.Logf("a child in the index (and the store): %d bytes keyed once, %d as IndexField keys it", once, twice)
	require.Less(t, once*10, twice*7, "keyed once is under seven tenths")
}
