package render

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

// Inventory is the set of children recorded on a parent (in its
// contract.AnnotationInventory annotation), by InventoryKey; nil when the
// parent carries no inventory at all. It proves ownership of the children
// that cannot carry an owner reference to the parent (IsOurs).
type Inventory map[string]bool

// InventoryKey names an object of the engine's own cluster in an
// inventory (contract.ObjectRef).
func InventoryKey(obj client.Object) string {
	return contract.ObjectRef(obj.GetObjectKind().GroupVersionKind().GroupKind(), obj.GetNamespace(), obj.GetName())
}

// InventoryOf reads the parent's inventory. An annotation that does not
// parse is an empty inventory: it proves nothing.
func InventoryOf(parent *unstructured.Unstructured) Inventory {
	raw, ok := parent.GetAnnotations()[contract.AnnotationInventory]
	if !ok {
		return nil
	}
	var keys []string
	_ = json.Unmarshal([]byte(raw), &keys)
	inv := make(Inventory, len(keys))
	for _, k := range keys {
		inv[k] = true
	}
	return inv
}

// Encode is the inventory as the parent's annotation stores it: a JSON
// array of the keys, sorted.
func (inv Inventory) Encode() string {
	keys := append([]string{}, slices.Sorted(maps.Keys(inv))...) // [] when empty, not null
	b, _ := json.Marshal(keys)
	return string(b)
}

// IsOurs reports whether obj is provably one of the parent's children.
// Labels alone prove nothing (anyone who may create an object may write
// them); the proof is a controller owner reference to the parent, or, for
// an object that cannot carry one, the parent's inventory, the parent's
// UID label and the entry's proof together (Proofs: the UID the engine
// saw, or the token it created the object with). The inventory names a
// child before it is created, so alone it would claim an object someone
// else made under that name, labelled or not. A parent that has the
// engine's finalizer but no inventory yet was created by an engine that
// kept none: its labelled objects are trusted until its first reconcile
// records the inventory.
func IsOurs(parent *unstructured.Unstructured, obj client.Object, inv Inventory, proofs Proofs) bool {
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		return ref.UID == parent.GetUID()
	}
	labelled := obj.GetLabels()[contract.LabelParentUID] == string(parent.GetUID())
	if inv == nil {
		return controllerutil.ContainsFinalizer(parent, contract.Finalizer) && labelled
	}
	key := InventoryKey(obj)
	return inv[key] && labelled && proofs.Proves(key, obj)
}

// NextInventory is the inventory the parent must carry, and its proofs
// (Entries): every desired child without an owner reference, and every
// live one not pruned yet.
func NextInventory(parent *unstructured.Unstructured, desired []*unstructured.Unstructured, live *LiveChildren) (Inventory, Proofs) {
	e := NewEntries(parent, ProofsOf(parent))
	for _, c := range live.list {
		if metav1.GetControllerOfNoCopy(c) != nil {
			continue
		}
		e.Live(InventoryKey(c), c)
	}
	for _, d := range desired {
		if len(d.GetOwnerReferences()) > 0 {
			continue // the owner reference is the proof: not recorded
		}
		e.Desired(InventoryKey(d))
	}
	return e.Inventory, e.Proofs
}

// Entries builds a parent's next inventory and its proofs, by one rule for
// its children in this cluster and in workload clusters: a desired child
// is recorded before it is created, with the hash of the token it is
// created with (Pending); a live one by its UID once seen, if its entry
// was proven before (one an older engine recorded without proof is kept
// so, since proving it again would write every such parent at an
// upgrade).
type Entries struct {
	Inventory Inventory
	Proofs    Proofs
	parent    *unstructured.Unstructured
	old       Proofs
}

// NewEntries starts the parent's next entries; old are the proofs it
// carries.
func NewEntries(parent *unstructured.Unstructured, old Proofs) *Entries {
	return &Entries{Inventory: Inventory{}, Proofs: Proofs{}, parent: parent, old: old}
}

// Live records the live child c at key.
func (e *Entries) Live(key string, c client.Object) {
	e.Inventory[key] = true
	if _, proven := e.old[key]; proven {
		e.Proofs[key] = Seen(c)
	}
}

// Desired records the desired child at key, pending, unless it is live.
func (e *Entries) Desired(key string) {
	if e.Inventory[key] {
		return
	}
	e.Inventory[key] = true
	e.Proofs[key] = Pending(e.parent, key)
}

// Keep records the entry at key as the parent carries it, with its old
// proof: a child the engine cannot see now (its cluster is down).
func (e *Entries) Keep(key string) {
	e.Inventory[key] = true
	if proof, ok := e.old[key]; ok {
		e.Proofs[key] = proof
	}
}
