package engine

import (
	"sync"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/templates"
)

// refIndex maps referenced objects to the parents that reference them: by
// name, and by label selector within a namespace. Reconciles write it
// (Track), watch events of referenced kinds read it (parents); it holds
// its lock only over its own maps.
type refIndex struct {
	mu       sync.Mutex
	byParent map[types.NamespacedName][]templates.Reference
	byObject map[refObject]map[types.NamespacedName]bool
	// bySelector holds, per kind and namespace, each parent's selectors.
	bySelector map[refScope]map[types.NamespacedName][]labels.Selector
}

type refScope struct {
	gvk       schema.GroupVersionKind
	namespace string
}

type refObject struct {
	refScope
	name string
}

func newRefIndex() *refIndex {
	return &refIndex{
		byParent:   map[types.NamespacedName][]templates.Reference{},
		byObject:   map[refObject]map[types.NamespacedName]bool{},
		bySelector: map[refScope]map[types.NamespacedName][]labels.Selector{},
	}
}

// track replaces what the parent references; nil forgets the parent.
func (x *refIndex) track(parent types.NamespacedName, refs []templates.Reference) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, ref := range x.byParent[parent] {
		scope := refScope{ref.GVK, ref.Namespace}
		if ref.ByName() {
			o := refObject{scope, ref.ObjectName}
			delete(x.byObject[o], parent)
			if len(x.byObject[o]) == 0 {
				delete(x.byObject, o)
			}
			continue
		}
		delete(x.bySelector[scope], parent)
		if len(x.bySelector[scope]) == 0 {
			delete(x.bySelector, scope)
		}
	}
	if len(refs) == 0 {
		delete(x.byParent, parent)
		return
	}
	x.byParent[parent] = refs
	for _, ref := range refs {
		scope := refScope{ref.GVK, ref.Namespace}
		if ref.ByName() {
			o := refObject{scope, ref.ObjectName}
			if x.byObject[o] == nil {
				x.byObject[o] = map[types.NamespacedName]bool{}
			}
			x.byObject[o][parent] = true
			continue
		}
		if x.bySelector[scope] == nil {
			x.bySelector[scope] = map[types.NamespacedName][]labels.Selector{}
		}
		x.bySelector[scope][parent] = append(x.bySelector[scope][parent], labels.SelectorFromSet(ref.Selector))
	}
}

// parents returns the parents that reference obj, of kind gvk.
func (x *refIndex) parents(gvk schema.GroupVersionKind, obj client.Object) []types.NamespacedName {
	scope := refScope{gvk, obj.GetNamespace()}
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []types.NamespacedName
	for p := range x.byObject[refObject{scope, obj.GetName()}] {
		out = append(out, p)
	}
	set := labels.Set(obj.GetLabels())
	for p, sels := range x.bySelector[scope] {
		for _, s := range sels {
			if s.Matches(set) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}
