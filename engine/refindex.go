package engine

import (
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cuengine/engine/templates"
)

// refKey is what one placed reference reaches, and what one informer of
// the reference cache watches (references.go): the objects of a kind in a
// namespace ("" for a cluster-scoped kind) with a name, or matching a
// label selector. References that reach the same objects share the key.
type refKey struct {
	gvk       schema.GroupVersionKind
	namespace string
	// name is the object's, "" for a selector.
	name string
	// selector is the canonical label selector, "" for a name.
	selector string
}

// keyOf is the key of a placed reference.
func keyOf(ref templates.Reference) refKey {
	k := refKey{gvk: ref.GVK, namespace: ref.Namespace}
	if ref.ByName() {
		k.name = ref.ObjectName
	} else {
		k.selector = labels.SelectorFromSet(ref.Selector).String()
	}
	return k
}

// String names the key for messages: "Secret team-a/db", "ConfigMap
// team-a with labels pick=yes".
func (k refKey) String() string {
	where := k.namespace
	if k.name != "" {
		if where != "" {
			where += "/"
		}
		return k.gvk.Kind + " " + where + k.name
	}
	if where != "" {
		where += " "
	}
	return k.gvk.Kind + " " + where + "with labels " + k.selector
}

// refHolder is a parent holding references, with the controller of its
// kind, which requeues it.
type refHolder struct {
	kc     *kindController
	parent types.NamespacedName
}

// refIndex maps each key to the parents that hold it, and back. Every
// object an informer of a key holds is one those parents read: an event
// on it requeues them all. It has no lock: the reference cache's guards
// it.
type refIndex struct {
	byHolder map[refHolder][]refKey
	byKey    map[refKey]map[refHolder]bool
}

func newRefIndex() *refIndex {
	return &refIndex{byHolder: map[refHolder][]refKey{}, byKey: map[refKey]map[refHolder]bool{}}
}

// track replaces what h holds (nil: nothing) and returns the keys no
// parent holds any more.
func (x *refIndex) track(h refHolder, keys []refKey) (released []refKey) {
	old := x.byHolder[h]
	for _, k := range old {
		delete(x.byKey[k], h)
	}
	delete(x.byHolder, h)
	for _, k := range keys {
		if x.byKey[k] == nil {
			x.byKey[k] = map[refHolder]bool{}
		}
		x.byKey[k][h] = true
	}
	if len(keys) > 0 {
		x.byHolder[h] = keys
	}
	for _, k := range old {
		if hs, ok := x.byKey[k]; ok && len(hs) == 0 {
			delete(x.byKey, k)
			released = append(released, k)
		}
	}
	return released
}

// releaseKind forgets every parent of the kind's controller and returns
// the keys no parent holds any more.
func (x *refIndex) releaseKind(kc *kindController) (released []refKey) {
	for h := range x.byHolder {
		if h.kc == kc {
			released = append(released, x.track(h, nil)...)
		}
	}
	return released
}

// holders returns the parents that hold k.
func (x *refIndex) holders(k refKey) []refHolder {
	out := make([]refHolder, 0, len(x.byKey[k]))
	for h := range x.byKey[k] {
		out = append(out, h)
	}
	return out
}

// held reports whether a parent holds k.
func (x *refIndex) held(k refKey) bool { return len(x.byKey[k]) > 0 }
