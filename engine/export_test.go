package engine

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ChildObject is the object the engine's child cache holds a kind in
// (childobjects.go), as decided when the engine started, for the tests in
// package engine_test.
func (e *Engine) ChildObject(gvk schema.GroupVersionKind) client.Object {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.objects.object(gvk)
}

// ChildCache is the engine's child cache, for the tests in package
// engine_test.
func (e *Engine) ChildCache() cache.Cache { return e.children }
