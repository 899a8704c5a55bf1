package engine

import (
	"encoding/json"
	"maps"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/cuengine/engine/contract"
)

// inventory is the set of children recorded on a parent, by inventoryKey;
// nil when the parent carries no inventory at all.
type inventory map[string]bool

// inventoryKey names an object in an inventory (contract.ObjectRef).
func inventoryKey(obj client.Object) string {
	return contract.ObjectRef(obj.GetObjectKind().GroupVersionKind().GroupKind(), obj.GetNamespace(), obj.GetName())
}

// inventoryOf reads the parent's inventory. An annotation that does not
// parse is an empty inventory: it proves nothing.
func inventoryOf(parent *unstructured.Unstructured) inventory {
	raw, ok := parent.GetAnnotations()[contract.AnnotationInventory]
	if !ok {
		return nil
	}
	var keys []string
	_ = json.Unmarshal([]byte(raw), &keys)
	inv := make(inventory, len(keys))
	for _, k := range keys {
		inv[k] = true
	}
	return inv
}

func (inv inventory) encode() string {
	keys := append([]string{}, slices.Sorted(maps.Keys(inv))...) // [] when empty, not null
	b, _ := json.Marshal(keys)
	return string(b)
}

// isOurs reports whether obj is provably one of the parent's children.
// Labels prove nothing (anyone who may create an object may write them);
// the proof is a controller owner reference to the parent, or, for an
// object that cannot carry one, the parent's inventory. A parent that has
// the engine's finalizer but no inventory yet was created by an engine that
// kept none: its labelled objects are trusted until its first reconcile
// records the inventory.
func isOurs(parent *unstructured.Unstructured, obj client.Object, inv inventory) bool {
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		return ref.UID == parent.GetUID()
	}
	if inv == nil {
		return controllerutil.ContainsFinalizer(parent, contract.Finalizer) && obj.GetLabels()[contract.LabelParentUID] == string(parent.GetUID())
	}
	return inv[inventoryKey(obj)]
}

// nextInventory is the inventory the parent must carry: every desired child
// without an owner reference (recorded before it is created), and every
// live one not pruned yet.
func nextInventory(desired []*unstructured.Unstructured, live *liveChildren) inventory {
	next := inventory{}
	for _, d := range desired {
		if len(d.GetOwnerReferences()) == 0 {
			next[inventoryKey(d)] = true
		}
	}
	for _, c := range live.list {
		if metav1.GetControllerOfNoCopy(c) == nil {
			next[inventoryKey(c)] = true
		}
	}
	return next
}
