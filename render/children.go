package render

import (
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
)

// LiveChildren are the parent's children as the child cache has them,
// indexed for matching against the desired ones in constant time.
type LiveChildren struct {
	list  []*unstructured.Unstructured
	byKey map[ChildKey]*unstructured.Unstructured
}

// ChildKey identifies a child: its kind, namespace and name, and the local
// name the template gave it. A desired and a live object are the same child
// when their keys are equal (KeyOf); ObjectKeyOf leaves the local name out.
type ChildKey struct {
	kind            schema.GroupKind
	namespace, name string
	local           string
}

// KeyOf is the key of a child, desired or live: its kind, namespace, name
// and local name (the contract.LabelChild label).
func KeyOf(obj *unstructured.Unstructured) ChildKey {
	return ChildKey{kind: obj.GroupVersionKind().GroupKind(), namespace: obj.GetNamespace(), name: obj.GetName(), local: obj.GetLabels()[contract.LabelChild]}
}

// ObjectKeyOf identifies the object alone, whichever child it is.
func ObjectKeyOf(obj *unstructured.Unstructured) ChildKey {
	return ChildKey{kind: obj.GroupVersionKind().GroupKind(), namespace: obj.GetNamespace(), name: obj.GetName()}
}

// NewLiveChildren indexes the parent's live children.
func NewLiveChildren(list []*unstructured.Unstructured) *LiveChildren {
	lc := &LiveChildren{list: list, byKey: make(map[ChildKey]*unstructured.Unstructured, len(list))}
	for _, c := range list {
		lc.byKey[KeyOf(c)] = c
	}
	return lc
}

// List returns the live children, in the order they were given.
func (lc *LiveChildren) List() []*unstructured.Unstructured { return lc.list }

// Get returns the live object of a desired child, or nil.
func (lc *LiveChildren) Get(desired *unstructured.Unstructured) *unstructured.Unstructured {
	return lc.byKey[KeyOf(desired)]
}

// OwnedChildren are the parent's children as the child cache holds them:
// typed for the built-in kinds, unstructured for the others. Their
// metadata is enough to tell whether anything changed; Read gives their
// content.
type OwnedChildren []client.Object

// OwnedOf keeps, of the listed objects, those provably the parent's own
// (IsOurs). An object that only carries the labels is invisible to every
// later step: it is never adopted, pruned or counted in the status.
func OwnedOf(parent *unstructured.Unstructured, list []client.Object) OwnedChildren {
	inv, proofs := InventoryOf(parent), ProofsOf(parent)
	return slices.DeleteFunc(list, func(c client.Object) bool { return !IsOurs(parent, c, inv, proofs) })
}

// Read returns the children as unstructured, for the steps that read
// their content: a typed child is converted here, once per reconcile that
// gets this far, rather than decoded from JSON on every watch event.
func (o OwnedChildren) Read() (*LiveChildren, error) {
	list := make([]*unstructured.Unstructured, len(o))
	for i, c := range o {
		u, err := asUnstructured(c)
		if err != nil {
			return nil, err
		}
		list[i] = u
	}
	return NewLiveChildren(list), nil
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

// Observed is what the template sees as observed: each existing child's
// content by its local name, and each external resource's state as
// status.resources last recorded it (ObservedResources). Connection
// Secrets are left out: what they hold is for nobody's eyes.
func (lc *LiveChildren) Observed(parent *unstructured.Unstructured) map[string]any {
	observed := make(map[string]any, len(lc.list))
	for _, c := range lc.list {
		if _, secret := c.GetAnnotations()[contract.AnnotationConnectionSecretOf]; secret {
			continue
		}
		if name := c.GetLabels()[contract.LabelChild]; name != "" {
			observed[name] = c.Object
		}
	}
	maps.Copy(observed, ObservedResources(parent))
	return observed
}

// ObservedResources is the state of each external resource that exists,
// by name, as the parent's status.resources last recorded it: what the
// template sees as observed.<name>. An entry is {provider, externalName}
// and, once the resource has been observed, {exists, ready, state}
// (written by reconciler/resourcestatus.go).
func ObservedResources(parent *unstructured.Unstructured) map[string]any {
	res, _, _ := unstructured.NestedMap(parent.Object, "status", contract.StatusResources)
	out := map[string]any{}
	for name, v := range res {
		m, ok := v.(map[string]any)
		if !ok {
			continue
		}
		exists, _ := m["exists"].(bool)
		state, _ := m["state"].(map[string]any)
		if exists && state != nil {
			out[name] = state
		}
	}
	return out
}
