package engine

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
)

// indexParentUID is the child caches' index on the parent-uid label,
// read by listByParentUID. It is the informer's own index, not
// controller-runtime's IndexField, which keys each value twice (with and
// without the object's namespace, for Lists in one namespace the engine
// never makes): a child costs the index and the store 381 bytes against 784
// (TestParentIndexKeysEachChildOnce). A List with MatchingFields on it is
// an error (controller-runtime knows no such field index), never an empty
// answer.
const indexParentUID = "engine.parentUID"

// addParentUIDIndex adds the parent-uid index to c's informer for obj's
// kind, starting it if it has not started. A cache of several informers
// per kind (one per namespace, under --namespace) has no one indexer to
// read: there the index is controller-runtime's field index.
func addParentUIDIndex(ctx context.Context, c cache.Cache, obj client.Object) error {
	inf, err := c.GetInformer(ctx, obj)
	if err != nil {
		return err
	}
	if _, ok := inf.(indexed); !ok {
		return c.IndexField(ctx, obj, indexParentUID, func(o client.Object) []string {
			keys, _ := parentUIDOf(o)
			return keys
		})
	}
	return inf.AddIndexers(toolscache.Indexers{indexParentUID: parentUIDOf})
}

// indexed is an informer whose one indexer can be read.
type indexed interface{ GetIndexer() toolscache.Indexer }

func parentUIDOf(obj any) ([]string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	if uid := m.GetLabels()[contract.LabelParentUID]; uid != "" {
		return []string{uid}, nil
	}
	return nil, nil
}

// listByParentUID sets list to the objects of c's informer for obj's kind
// that carry the parent uid: copies, or with shared the cache's own, to be
// read only. An informer that has not synced (its cache not started) is an
// error, as a List of the cache is, never an empty answer.
func listByParentUID(ctx context.Context, c cache.Cache, obj client.Object, list client.ObjectList, uid string, shared bool) error {
	inf, err := c.GetInformer(ctx, obj)
	if err != nil {
		return err
	}
	ix, ok := inf.(indexed)
	if !ok { // controller-runtime's field index (addParentUIDIndex)
		opts := []client.ListOption{client.MatchingFields{indexParentUID: uid}}
		if shared {
			opts = append(opts, client.UnsafeDisableDeepCopy)
		}
		return c.List(ctx, list, opts...)
	}
	if !inf.HasSynced() {
		return fmt.Errorf("the cache of %T has not synced yet", obj)
	}
	items, err := ix.GetIndexer().ByIndex(indexParentUID, uid)
	if err != nil {
		return err
	}
	objs := make([]runtime.Object, 0, len(items))
	for _, it := range items {
		o, ok := it.(runtime.Object)
		if !ok {
			return fmt.Errorf("the cache holds a %T", it)
		}
		if !shared {
			o = o.DeepCopyObject()
			o.GetObjectKind().SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
		}
		objs = append(objs, o)
	}
	return meta.SetList(list, objs)
}
