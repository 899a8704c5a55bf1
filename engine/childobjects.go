package engine

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// childObjects chooses how the child cache holds each child kind. A kind
// the scheme knows (client-go's: Deployments, Services, ConfigMaps...) is
// held as its Go type, which controller-runtime reads from the apiserver in
// protobuf: several times cheaper to decode than JSON into unstructured, and
// a fraction of its memory. Any other kind (CRD-based) is unstructured,
// read in JSON. The reconciler works on unstructured objects: a typed child
// is converted when a reconcile reads it (render.OwnedChildren.Read), not
// on every watch event. Without a scheme every kind is unstructured.
type childObjects struct{ scheme *runtime.Scheme }

// typed reports whether the kind is held as its Go type.
func (c childObjects) typed(gvk schema.GroupVersionKind) bool {
	return c.scheme != nil && c.scheme.Recognizes(gvk)
}

// object returns an empty object of the kind, as the cache holds it.
func (c childObjects) object(gvk schema.GroupVersionKind) client.Object {
	if o, ok := newTyped[client.Object](c, gvk, gvk); ok {
		return o
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// list returns an empty list of the kind, as the cache holds it.
func (c childObjects) list(gvk schema.GroupVersionKind) client.ObjectList {
	listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
	if l, ok := newTyped[client.ObjectList](c, gvk, listGVK); ok {
		return l
	}
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(listGVK)
	return l
}

// newTyped returns a new object of the scheme's Go type for what (the kind
// or its list), when the kind is held typed.
func newTyped[T any](c childObjects, kind, what schema.GroupVersionKind) (T, bool) {
	var none T
	if !c.typed(kind) {
		return none, false
	}
	obj, err := c.scheme.New(what)
	if err != nil {
		return none, false
	}
	t, ok := obj.(T)
	return t, ok
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

// apiTypesMinor is the Kubernetes minor version of the API types the engine
// is built with (k8s.io/api v0.37 is Kubernetes 1.37); a test keeps it in
// line with go.mod.
const apiTypesMinor = 37

// childObjectsFor returns how the child cache is to hold children on the
// engine's apiserver: built-in kinds typed when the apiserver is no newer
// than the engine's API types, and otherwise every kind unstructured. Go
// types drop the fields they do not know, so on a newer apiserver a
// template could not read a field its Kubernetes version added, and a
// child setting one would never be seen as applied.
func (e *Engine) childObjectsFor(ctx context.Context) childObjects {
	logger := log.FromContext(ctx)
	server, err := serverVersion(ctx, e.mgr.GetConfig(), e.mgr.GetHTTPClient())
	if err != nil {
		logger.Error(err, "cannot read the apiserver's version: every child kind is cached unstructured")
		return childObjects{}
	}
	if !typesKnowAllFields(server) {
		logger.Info("the apiserver is newer than the engine's Kubernetes API types: every child kind is cached unstructured", "apiserver", server.GitVersion, "types", fmt.Sprintf("1.%d", apiTypesMinor))
		return childObjects{}
	}
	return childObjects{scheme: e.mgr.GetScheme()}
}

// serverVersion asks the apiserver its version, within a few seconds.
func serverVersion(ctx context.Context, cfg *rest.Config, httpClient *http.Client) (*version.Info, error) {
	dc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return dc.ServerVersionWithContext(ctx)
}

// typesKnowAllFields reports whether the engine's API types are as new as
// the apiserver: Kubernetes 1.x with x at most apiTypesMinor (managed
// clusters may report a minor such as "37+").
func typesKnowAllFields(server *version.Info) bool {
	digits := strings.TrimRightFunc(server.Minor, func(r rune) bool { return r < '0' || r > '9' })
	minor, err := strconv.Atoi(digits)
	return err == nil && server.Major == "1" && minor <= apiTypesMinor
}
