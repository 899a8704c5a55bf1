package engine

import (
	"context"
	"math"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// benchParent is a MyKind as the bench leaves it: the engine's finalizer
// and revision annotation, its status with two conditions.
const benchParent = `{"apiVersion":"webapp.my.domain/v1","kind":"MyKind","metadata":{"annotations":{"engine.cuengine.dev/template-revision":"mykind-7d9f8c6b5"},"creationTimestamp":"2026-12-02T16:49:54Z","finalizers":["engine.cuengine.dev/cleanup"],"generation":1,"name":"mykind-000123","namespace":"bench","resourceVersion":"123456","uid":"0d4c2b7e-4a1f-4a9e-9a43-2b1e7c6f5a10"},"spec":{"deploymentName":"mykind-000123","replicas":0},"status":{"conditions":[{"lastTransitionTime":"2026-12-02T16:49:55Z","message":"all children are ready","observedGeneration":1,"reason":"Ready","status":"True","type":"Ready"},{"lastTransitionTime":"2026-12-02T16:49:55Z","message":"","observedGeneration":1,"reason":"Synced","status":"True","type":"Synced"}],"observedGeneration":1,"readyReplicas":0}}`

func decodeParent(t testing.TB, doc string) *unstructured.Unstructured {
	t.Helper()
	m := map[string]any{}
	require.NoError(t, utiljson.Unmarshal([]byte(doc), &m))
	return &unstructured.Unstructured{Object: m}
}

// TestPackingKeepsEveryValue: a packed parent reads back as the object
// the apiserver sent, whatever its top-level fields and their values
// (floats with integral values, integers past 2^53), however often it was
// packed (client-go transforms a WatchList's objects twice: without
// this, the engine's restart test found the second engine reading
// parents with no spec); one with nothing to pack is left as it is.
func TestPackingKeepsEveryValue(t *testing.T) {
	for _, doc := range []string{
		benchParent,
		`{"apiVersion":"x/v1","kind":"K","metadata":{"name":"a"},"spec":{"f":1.0,"g":2.5,"big":9007199254740993,"neg":-0.0,"list":[1,1.0,"s",null,true,{}],"empty":{},"none":null},"data":{"k":"v"}}`,
		`{"apiVersion":"x/v1","kind":"K","metadata":{"name":"b"}}`,
		`{"apiVersion":"x/v1","kind":"K","metadata":{"name":"c"},"spec":{"s":"日本\u2028<&>\"\\\t"}}`,
	} {
		want := decodeParent(t, doc)
		got, err := packParent(decodeParent(t, doc))
		require.NoError(t, err)
		got, err = packParent(got)
		require.NoError(t, err)
		u := got.(*unstructured.Unstructured)
		if len(want.Object) > 3 {
			require.Len(t, u.Object, 4, "only apiVersion, kind, metadata and the packing are left")
			require.IsType(t, "", u.Object[packedKey])
		}
		require.NoError(t, unpackParent(u))
		require.Equal(t, want.Object, u.Object, doc)
	}
	f := decodeParent(t, `{"apiVersion":"x/v1","kind":"K","metadata":{"name":"a"},"spec":{"f":1.0}}`)
	require.IsType(t, float64(0), f.Object["spec"].(map[string]any)["f"], "the decoder's own types, which the packing keeps")

	// What JSON would not carry as it was is kept whole.
	odd := &unstructured.Unstructured{Object: map[string]any{"kind": "K", "spec": map[string]any{"inf": math.Inf(1)}}}
	got, err := packParent(odd)
	require.NoError(t, err)
	require.Contains(t, got.(*unstructured.Unstructured).Object, "spec")
}

// TestPackedParentIsSmaller: the bench's parent holds less packed than as
// maps (measured: 3.5 against 2.0 KiB).
func TestPackedParentIsSmaller(t *testing.T) {
	size := func(build func() any) uint64 {
		const n = 2000
		keep := make([]any, 0, n)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for range n {
			keep = append(keep, build())
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(keep)
		return (after.HeapAlloc - before.HeapAlloc) / n
	}
	whole := size(func() any { return decodeParent(t, benchParent) })
	packed := size(func() any {
		p, err := packParent(decodeParent(t, benchParent))
		require.NoError(t, err)
		return p
	})
	t.Logf("a parent as maps: %d bytes; packed: %d", whole, packed)
	require.Less(t, packed*4, whole*3, "packed is under three quarters of the maps")
}

// storeCache serves Get and List of unstructured objects as
// controller-runtime's cache reader does: a deep copy, or with
// UnsafeDisableDeepCopy the stored object's own maps.
type storeCache struct {
	cache.Cache
	objs []*unstructured.Unstructured
}

func (c storeCache) Get(_ context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	for _, o := range c.objs {
		if client.ObjectKeyFromObject(o) == key {
			*obj.(*unstructured.Unstructured) = *o.DeepCopy()
			return nil
		}
	}
	return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
}

func (c storeCache) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := client.ListOptions{}
	o.ApplyOptions(opts)
	ul := list.(*unstructured.UnstructuredList)
	for _, s := range c.objs {
		if o.UnsafeDisableDeepCopy != nil && *o.UnsafeDisableDeepCopy {
			ul.Items = append(ul.Items, *s)
		} else {
			ul.Items = append(ul.Items, *s.DeepCopy())
		}
	}
	return nil
}

// TestParentCacheReadsWhole: Get and List of the parent cache give the
// object whole, and a List without a deep copy leaves the cache's own
// object packed; counting does not unpack.
func TestParentCacheReadsWhole(t *testing.T) {
	want := decodeParent(t, benchParent)
	stored, err := packParent(decodeParent(t, benchParent))
	require.NoError(t, err)
	inner := storeCache{objs: []*unstructured.Unstructured{stored.(*unstructured.Unstructured)}}
	c := parentCache{inner}
	ctx := context.Background()

	got := &unstructured.Unstructured{}
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: "bench", Name: "mykind-000123"}, got))
	require.Equal(t, want.Object, got.Object)

	for _, opts := range [][]client.ListOption{nil, {client.UnsafeDisableDeepCopy}} {
		list := &unstructured.UnstructuredList{}
		require.NoError(t, c.List(ctx, list, opts...))
		require.Len(t, list.Items, 1)
		require.Equal(t, want.Object, list.Items[0].Object)
		require.Contains(t, inner.objs[0].Object, packedKey, "the cache's object is left packed")
		require.NotContains(t, inner.objs[0].Object, "spec")
	}
	n, err := countParents(ctx, c, &unstructured.UnstructuredList{})
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

// BenchmarkParentRead: a reconcile's read of the bench's parent, packed
// (the deep copy the cache makes, then the unpacking) against as maps
// (the deep copy), and the packing each watch event pays.
func BenchmarkParentRead(b *testing.B) {
	whole := decodeParent(b, benchParent)
	p, err := packParent(decodeParent(b, benchParent))
	require.NoError(b, err)
	packed := p.(*unstructured.Unstructured)
	b.Run("maps", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = whole.DeepCopy()
		}
	})
	b.Run("packed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := unpackParent(packed.DeepCopy()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("pack", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := packParent(whole.DeepCopy()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
