package engine

import (
	"context"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// oneInformer is a cache as one watch of a controller sees it: its
// WaitForCacheSync waits for the informer of that watch's type only.
// controller-runtime's source.Kind waits for the whole cache to sync before
// it lets its controller start, and the engine's caches are shared by every
// kind: one kind whose first list is slow (the apiserver answers the first
// list of a newly served custom resource with Retry-After: 1s while its
// watch cache fills) held back the start of every other kind.
type oneInformer struct {
	cache.Cache
	obj client.Object
}

// cacheFor returns c as a watch of obj's type sees it.
func cacheFor(c cache.Cache, obj client.Object) cache.Cache {
	return oneInformer{Cache: c, obj: obj}
}

// WaitForCacheSync implements cache.Cache: it waits until the watch's
// informer has synced, or ctx ends; on the informer's channel where it has
// one, not by polling every 100ms.
func (c oneInformer) WaitForCacheSync(ctx context.Context) bool {
	inf, err := c.GetInformer(ctx, c.obj, cache.BlockUntilSynced(false))
	if err != nil {
		return false
	}
	if ch, ok := inf.(interface{ HasSyncedChecker() toolscache.DoneChecker }); ok {
		return toolscache.WaitFor(ctx, "", ch.HasSyncedChecker())
	}
	return toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
}

// startInformer starts the informer of obj's type in c without waiting
// for it to sync, so that its first list runs while the controller loads
// its revisions.
func startInformer(ctx context.Context, c cache.Cache, obj client.Object) error {
	_, err := c.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
	return err
}
