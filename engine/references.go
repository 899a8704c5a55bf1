package engine

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

// The objects a kind's templates reference are held in a cache of the
// kind's own (not the child cache, which holds only the engine's objects),
// started when the kind's controller runs and stopped with it, with an
// informer per referenced kind: those the template lists from the start,
// and any other the first reconcile that reads one. A reload drops the
// informers of the kinds nothing references any more. Events on a
// referenced object requeue the parents that reference it (refindex.go).
// The engine only ever reads these objects: this cache has no writer.

// newReferenceCache returns a cache for referenced objects: unstructured,
// without managed fields, in the engine's namespace when it has one.
func (e *Engine) newReferenceCache() (cache.Cache, error) {
	opts := cache.Options{
		HTTPClient:       e.mgr.GetHTTPClient(),
		Scheme:           e.mgr.GetScheme(),
		Mapper:           e.mgr.GetRESTMapper(),
		DefaultTransform: cache.TransformStripManagedFields(),
	}
	if e.opts.Namespace != "" {
		opts.DefaultNamespaces = map[string]cache.Config{e.opts.Namespace: {}}
	}
	return cache.New(e.mgr.GetConfig(), opts)
}

// startReferences starts the kind's reference cache until ctx ends and
// watches the kinds the template references.
func (kc *kindController) startReferences(ctx context.Context) error {
	c, err := kc.e.newReferenceCache()
	if err != nil {
		return fmt.Errorf("building the reference cache: %w", err)
	}
	go func() {
		if err := c.Start(ctx); err != nil {
			log.FromContext(ctx).Error(err, "reference cache stopped", "kind", contract.KindString(kc.gvk))
		}
	}()
	if !c.WaitForCacheSync(ctx) {
		return fmt.Errorf("starting the reference cache: %w", ctx.Err())
	}
	kc.mu.Lock()
	kc.refCache = c
	kc.refWatching = map[schema.GroupVersionKind]bool{}
	kc.mu.Unlock()
	kc.watchReferenceKinds(ctx, kc.Template())
	return nil
}

// watchReferenceKinds watches the kinds t references and drops the
// informers of the kinds it does not: a parent still reading one (pinned
// to an older revision, or through a kind only known once evaluated)
// watches it again in its next reconcile (Read).
func (kc *kindController) watchReferenceKinds(ctx context.Context, t *templates.Template) {
	kc.mu.Lock()
	running := kc.refCache != nil
	kc.mu.Unlock()
	if !running {
		return // the next run watches them
	}
	kc.keepReferenceKinds(ctx, t.ReferenceKinds())
}

// dropReferences stops watching every referenced kind: the kind's template
// was removed, and its controller only finishes deletions, which never
// read references.
func (kc *kindController) dropReferences() {
	kc.keepReferenceKinds(kc.context(), nil)
}

// keepReferenceKinds watches the kinds wanted and removes the informers
// of the others.
func (kc *kindController) keepReferenceKinds(ctx context.Context, wanted []schema.GroupVersionKind) {
	for _, gvk := range wanted {
		if err := kc.watchReference(ctx, gvk); err != nil {
			log.FromContext(ctx).Error(err, "cannot watch referenced kind", "kind", contract.KindString(kc.gvk), "referencedKind", contract.KindString(gvk))
		}
	}
	kc.mu.Lock()
	c := kc.refCache
	if c == nil {
		kc.mu.Unlock()
		return
	}
	var unused []schema.GroupVersionKind
	for gvk := range kc.refWatching {
		if !slices.Contains(wanted, gvk) {
			unused = append(unused, gvk)
			delete(kc.refWatching, gvk)
		}
	}
	kc.mu.Unlock()
	for _, gvk := range unused {
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(gvk)
		if err := c.RemoveInformer(ctx, obj); err != nil {
			log.FromContext(ctx).Error(err, "cannot stop watching referenced kind", "kind", contract.KindString(kc.gvk), "referencedKind", contract.KindString(gvk))
		}
	}
}

// watchReference makes events on objects of a referenced kind requeue the
// parents that reference them, once per kind.
func (kc *kindController) watchReference(ctx context.Context, gvk schema.GroupVersionKind) error {
	kc.mu.Lock()
	ctrl, c := kc.ctrl, kc.refCache
	already := kc.refWatching[gvk]
	if !already && ctrl != nil && c != nil {
		kc.refWatching[gvk] = true
	}
	kc.mu.Unlock()
	if already {
		return nil
	}
	if ctrl == nil || c == nil {
		return fmt.Errorf("the controller of %s is not running", contract.KindString(kc.gvk))
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	parents := func(_ context.Context, o *unstructured.Unstructured) []reconcile.Request {
		var out []reconcile.Request
		for _, p := range kc.refs.parents(gvk, o) {
			out = append(out, reconcile.Request{NamespacedName: p})
		}
		return out
	}
	if err := ctrl.Watch(source.Kind(cacheFor(c, obj), obj, handler.TypedEnqueueRequestsFromMapFunc(parents))); err != nil {
		kc.mu.Lock()
		delete(kc.refWatching, gvk)
		kc.mu.Unlock()
		return fmt.Errorf("watching referenced %s: %w", gvk.Kind, err)
	}
	return nil
}

// Track implements reconciler.References.
func (kc *kindController) Track(parent types.NamespacedName, refs []templates.Reference) {
	kc.refs.track(parent, refs)
}

// Read implements reconciler.References: the referenced object, or the
// objects its selector matches, from the kind's reference cache.
func (kc *kindController) Read(ctx context.Context, ref templates.Reference) ([]*unstructured.Unstructured, error) {
	if err := kc.watchReference(ctx, ref.GVK); err != nil {
		return nil, err
	}
	kc.mu.Lock()
	c := kc.refCache
	kc.mu.Unlock()
	return render.ReadReference(ctx, c, ref)
}

// referencedViews reads a parent's references for the rollout's hold check
// (rollout.Hold), as the reconcile reads them: false when one cannot be
// placed or read, or does not exist, when the reconcile changes nothing.
func (kc *kindController) referencedViews(t *templates.Template, parent *unstructured.Unstructured) (map[string]any, bool) {
	refs, err := render.ResolveReferences(t, parent, kc.e.scoper, kc.e.opts.Limits)
	if err != nil {
		return nil, false
	}
	out := make(map[string]any, len(refs))
	for _, ref := range refs {
		objs, err := kc.Read(kc.context(), ref)
		if err != nil {
			return nil, false
		}
		view, ok := render.Observed(ref, objs)
		if !ok {
			return nil, false
		}
		out[ref.Name] = view
	}
	return out, true
}
