package engine

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/internal/jsonhash"
	"github.com/cuengine/engine/reconciler"
)

// The parent cache holds each parent's apiVersion, kind and metadata as
// maps, as any unstructured object, and every other top-level field (spec,
// status, whatever a kind has) as one JSON string under packedKey. A
// decoded MyKind of the bench with its status is 3.5 KiB of maps and
// strings; packed, 2.0 KiB (TestPackedParentIsSmaller): most of a parent's
// memory was its maps' own, and the engine holds every parent for as long
// as it runs.
//
// Whatever reads a parent from the cache reads it whole: Get and List of
// parentCache unpack what they return, so the reconciler, the rollouts,
// the fence and the heap bar see the object the apiserver sent. Only the
// watch's event handlers see the packed form, and they read metadata
// (parentChanged, the request's name). The packing decodes back to the
// same Go values (jsonhash.Append): an object it could not write so is
// kept as it came; it is undone once, however often client-go transforms
// the same object.

// packedKey is the top-level key of the packed fields: no field of a
// custom resource has a name that starts with a NUL.
const packedKey = "\x00engine.packed"

// packParent is the parent cache's transform, after the managed fields are
// dropped: it packs an unstructured parent's fields other than apiVersion,
// kind and metadata, in place. client-go hands it an initial list's
// objects twice (a WatchList's temporary store transforms them, and then
// the queue they are replaced into), so it must be idempotent: an object
// already packed is left as it is.
func packParent(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u.Object == nil {
		return obj, nil
	}
	if _, packed := u.Object[packedKey]; packed {
		return obj, nil
	}
	rest := make(map[string]any, len(u.Object))
	for k, v := range u.Object {
		if k != "apiVersion" && k != "kind" && k != "metadata" {
			rest[k] = v
		}
	}
	if len(rest) == 0 {
		return obj, nil
	}
	b, err := jsonhash.Append(nil, rest)
	if err != nil {
		return obj, nil // kept whole
	}
	for k := range rest {
		delete(u.Object, k)
	}
	u.Object[packedKey] = string(b)
	return obj, nil
}

// unpackParent makes u whole again. u's top-level map may be the cache's
// (a read without a deep copy): it is replaced, not changed.
func unpackParent(u *unstructured.Unstructured) error {
	packed, ok := u.Object[packedKey].(string)
	if !ok {
		return nil
	}
	m := make(map[string]any, len(u.Object)+2)
	for k, v := range u.Object {
		if k != packedKey {
			m[k] = v
		}
	}
	if err := utiljson.Unmarshal([]byte(packed), &m); err != nil {
		return fmt.Errorf("unpacking the cached %s %s: %w", u.GetKind(), client.ObjectKeyFromObject(u), err)
	}
	u.Object = m
	if v := reconciler.UnconvertibleVersion(u); v != "" {
		u.SetAPIVersion(v) // as stored (storedversion.go): its writes go there
	}
	return nil
}

// parentCache is a cache of packed parents whose reads unpack them.
type parentCache struct {
	cache.Cache
}

// Get implements client.Reader.
func (c parentCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Cache.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return unpackParent(u)
	}
	return nil
}

// List implements client.Reader.
func (c parentCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Cache.List(ctx, list, opts...); err != nil {
		return err
	}
	if ul, ok := list.(*unstructured.UnstructuredList); ok {
		for i := range ul.Items {
			if err := unpackParent(&ul.Items[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// countParents returns how many parents of list's kind c holds, without
// unpacking them where c is a parentCache.
func countParents(ctx context.Context, c client.Reader, list *unstructured.UnstructuredList) (int, error) {
	if pc, ok := c.(parentCache); ok {
		c = pc.Cache
	}
	if err := c.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return 0, err
	}
	return len(list.Items), nil
}
