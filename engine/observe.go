package engine

import (
	"context"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
)

// liveChildren are the parent's children as the child cache has them,
// indexed for matching against the desired ones in constant time.
type liveChildren struct {
	list  []*unstructured.Unstructured
	byKey map[childKey]*unstructured.Unstructured
}

// childKey identifies a child: its kind, namespace and name, and the local
// name the template gave it. A desired and a live object are the same child
// when their keys are equal.
type childKey struct {
	kind            schema.GroupKind
	namespace, name string
	local           string
}

func keyOf(obj *unstructured.Unstructured) childKey {
	return childKey{kind: obj.GroupVersionKind().GroupKind(), namespace: obj.GetNamespace(), name: obj.GetName(), local: obj.GetLabels()[contract.LabelChild]}
}

// objectKeyOf identifies the object alone, whichever child it is.
func objectKeyOf(obj *unstructured.Unstructured) childKey {
	return childKey{kind: obj.GroupVersionKind().GroupKind(), namespace: obj.GetNamespace(), name: obj.GetName()}
}

func newLiveChildren(list []*unstructured.Unstructured) *liveChildren {
	lc := &liveChildren{list: list, byKey: make(map[childKey]*unstructured.Unstructured, len(list))}
	for _, c := range list {
		lc.byKey[keyOf(c)] = c
	}
	return lc
}

// get returns the live object of a desired child, or nil.
func (lc *liveChildren) get(desired *unstructured.Unstructured) *unstructured.Unstructured {
	return lc.byKey[keyOf(desired)]
}

// ownedChildren are the parent's children as the child cache holds them:
// typed for the built-in kinds, unstructured for the others
// (childobjects.go). Their metadata is enough to tell whether anything
// changed (settled.go); read gives their content.
type ownedChildren []client.Object

// observe lists the parent's existing children of every watched kind: the
// objects labelled as its children that are provably its own (isOurs). An
// object that only carries the labels is invisible to every later step: it
// is never adopted, pruned or counted in the status.
func (r *reconciler) observe(ctx context.Context, parent *unstructured.Unstructured) (ownedChildren, error) {
	list, err := r.children.list(ctx, parent)
	if err != nil {
		return nil, err
	}
	return ownedOf(parent, list), nil
}

// ownedOf keeps, of the listed objects, those provably the parent's own.
func ownedOf(parent *unstructured.Unstructured, list []client.Object) ownedChildren {
	inv := inventoryOf(parent)
	return slices.DeleteFunc(list, func(c client.Object) bool { return !isOurs(parent, c, inv) })
}

// read returns the children as unstructured, for the steps that read
// their content: a typed child is converted here, once per reconcile that
// gets this far, rather than decoded from JSON on every watch event.
func (o ownedChildren) read() (*liveChildren, error) {
	list := make([]*unstructured.Unstructured, len(o))
	for i, c := range o {
		u, err := asUnstructured(c)
		if err != nil {
			return nil, err
		}
		list[i] = u
	}
	return newLiveChildren(list), nil
}

// observed is what the template sees as observed: each existing child's
// content by its local name, and each external resource's state as
// status.resources last recorded it.
func (lc *liveChildren) observed(parent *unstructured.Unstructured) map[string]any {
	observed := make(map[string]any, len(lc.list))
	for _, c := range lc.list {
		if name := c.GetLabels()[contract.LabelChild]; name != "" {
			observed[name] = c.Object
		}
	}
	maps.Copy(observed, observedResources(storedResources(parent)))
	return observed
}
