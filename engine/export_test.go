package engine

import (
	"slices"
	"strings"

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

// ReferenceKinds are the referenced kinds the kind's parents hold
// informers of (references.go), sorted; none when it does not run.
func (e *Engine) ReferenceKinds(gvk schema.GroupVersionKind) []schema.GroupVersionKind {
	e.mu.Lock()
	kc := e.kinds[gvk]
	e.mu.Unlock()
	if kc == nil {
		return nil
	}
	var out []schema.GroupVersionKind
	for k := range e.refs.kinds(kc) {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b schema.GroupVersionKind) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// ReferenceObjects counts the objects the engine's reference cache holds,
// over every kind.
func (e *Engine) ReferenceObjects() int { return e.refs.objects() }

// ReferenceWatches counts the reference cache's informers.
func (e *Engine) ReferenceWatches() int {
	e.refs.mu.Lock()
	defer e.refs.mu.Unlock()
	return len(e.refs.informers)
}

// The parent-uid index (parentindex.go), for the tests in package
// engine_test.
var (
	AddParentUIDIndex = addParentUIDIndex
	ListByParentUID   = listByParentUID
	IndexParentUID    = indexParentUID
)
