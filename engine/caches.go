package engine

import (
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cuengine/engine/contract"
)

// engineCaches are the engine's own caches, besides the manager's: of
// the children and of the parents.
type engineCaches struct {
	children cache.Cache
	parents  cache.Cache  // packed: read through parentCache
	stored   *storedReads // how the parents' informers read kinds stored in another version
}

// addCaches builds the engine's caches and adds them to the manager.
func addCaches(mgr manager.Manager, opts Options) (engineCaches, error) {
	childCache, err := newChildCache(mgr, opts.Namespace, opts.Shard)
	if err != nil {
		return engineCaches{}, err
	}
	stored := &storedReads{limits: opts.Limits, pool: opts.Evaluators} // storedversion.go
	parentsCache, err := newParentCache(mgr, opts.Namespace, opts.Shard, stored)
	if err != nil {
		return engineCaches{}, err
	}
	if opts.Shard == "" {
		// Started with the leader's runnables; the parents on every
		// replica, as the manager's cache that held them before.
		if err := mgr.Add(childCache); err != nil {
			return engineCaches{}, err
		}
		if err := mgr.Add(everyReplicaCache{parentsCache}); err != nil {
			return engineCaches{}, err
		}
	} else {
		// Every replica reconciles: its caches start with the manager's.
		for _, c := range []cache.Cache{childCache, parentsCache} {
			if err := mgr.Add(everyReplicaCache{c}); err != nil {
				return engineCaches{}, err
			}
		}
	}
	return engineCaches{children: childCache, parents: parentsCache, stored: stored}, nil
}

// newChildCache returns a cache that holds only objects labelled
// managed-by=engine, whatever their kind, and under sharding only the
// shard's.
func newChildCache(mgr manager.Manager, namespace, shard string) (cache.Cache, error) {
	set := labels.Set{contract.LabelManagedBy: contract.ManagedByValue}
	if shard != "" {
		set[contract.LabelShard] = shard
	}
	return newSelectedCache(mgr, namespace, labels.SelectorFromSet(set), nil, nil)
}

// newParentCache returns the cache of the parents, whatever their kind,
// under sharding only those labelled with the shard: it holds them packed
// (parentcache.go), to be read through parentCache.
func newParentCache(mgr manager.Manager, namespace, shard string, stored *storedReads) (cache.Cache, error) {
	selector := labels.Everything()
	if shard != "" {
		selector = labels.SelectorFromSet(labels.Set{contract.LabelShard: shard})
	}
	strip := cache.TransformStripManagedFields()
	stored.cfg, stored.httpClient, stored.mapper = mgr.GetConfig(), mgr.GetHTTPClient(), mgr.GetRESTMapper()
	stored.namespace, stored.selector = namespace, selector
	return newSelectedCache(mgr, namespace, selector, func(obj any) (any, error) {
		obj, err := strip(obj)
		if err != nil {
			return nil, err
		}
		return packParent(obj)
	}, stored.newInformer)
}

func newSelectedCache(mgr manager.Manager, namespace string, selector labels.Selector, transform toolscache.TransformFunc, newInformer func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer) (cache.Cache, error) {
	if transform == nil {
		transform = cache.TransformStripManagedFields()
	}
	opts := cache.Options{
		HTTPClient:           mgr.GetHTTPClient(),
		Scheme:               mgr.GetScheme(),
		Mapper:               mgr.GetRESTMapper(),
		DefaultLabelSelector: selector,
		DefaultTransform:     transform,
	}
	if newInformer != nil {
		opts.NewInformer = newInformer
	}
	if namespace != "" {
		opts.DefaultNamespaces = map[string]cache.Config{namespace: {}}
	}
	return cache.New(mgr.GetConfig(), opts)
}

// everyReplicaCache is a cache the manager starts on every replica, with
// its own cache and before the other runnables (it has GetCache).
type everyReplicaCache struct{ cache.Cache }

func (c everyReplicaCache) GetCache() cache.Cache { return c.Cache }
