package engine

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// childObjects chooses how the child cache holds each child kind. A kind
// the scheme knows (client-go's: Deployments, Services, ConfigMaps...) is
// held as its Go type, which controller-runtime reads from the apiserver in
// protobuf: several times cheaper to decode than JSON into unstructured, and
// a fraction of its memory. Any other kind (CRD-based) is unstructured,
// read in JSON. The reconciler works on unstructured objects: a typed child
// is converted when a reconcile lists it, not on every watch event.
type childObjects struct{ scheme *runtime.Scheme }

// typed reports whether the kind is held as its Go type.
func (c childObjects) typed(gvk schema.GroupVersionKind) bool {
	return c.scheme != nil && c.scheme.Recognizes(gvk)
}

// object returns an empty object of the kind, as the cache holds it.
func (c childObjects) object(gvk schema.GroupVersionKind) client.Object {
	if c.typed(gvk) {
		if obj, err := c.scheme.New(gvk); err == nil {
			if o, ok := obj.(client.Object); ok {
				return o
			}
		}
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// list returns an empty list of the kind, as the cache holds it.
func (c childObjects) list(gvk schema.GroupVersionKind) client.ObjectList {
	listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
	if c.typed(gvk) {
		if obj, err := c.scheme.New(listGVK); err == nil {
			if l, ok := obj.(client.ObjectList); ok {
				return l
			}
		}
	}
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(listGVK)
	return l
}

// items returns the objects of a list of the kind, each with its
// apiVersion and kind (typed objects from the cache carry none). The
// cached objects are only read: the result is for reading too.
func (c childObjects) items(gvk schema.GroupVersionKind, list client.ObjectList) ([]client.Object, error) {
	objs, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	out := make([]client.Object, len(objs))
	for i, obj := range objs {
		o, ok := obj.(client.Object)
		if !ok {
			return nil, fmt.Errorf("listing %s: %T is not an object", gvk.Kind, obj)
		}
		if _, ok := o.(*unstructured.Unstructured); !ok {
			// A typed item is the list's own copy of the cached struct:
			// setting its kind does not touch the cache (an unstructured
			// one shares its map with the cache, and has its kind).
			o.GetObjectKind().SetGroupVersionKind(gvk)
		}
		out[i] = o
	}
	return out, nil
}

// asUnstructured returns a child as unstructured, for reading: an
// unstructured one as it is, a typed one converted.
func asUnstructured(obj client.Object) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u, nil
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("reading %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	return u, nil
}
