package render

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cuengine/engine/contract"
)

// Fields left to other writers (a child's ownership field, templates'
// leftfields.go). The desired child carries them in its
// contract.AnnotationOwnership, so they are part of its applied hash: a
// marker added or removed is one apply. A CreateOnly path is not (its
// value is the template's only when the child is created): a change of it,
// in the template or live, is no reason to apply. When the engine applies
// the child for another reason, it sends what the live object holds at
// each such path (KeepingLive): server-side apply then neither reverts the
// value nor, where the engine still owns the field, removes it.

// formatOwnership is the value of contract.AnnotationOwnership for the
// modes by path: "path=Mode" items, sorted, comma-separated.
func formatOwnership(modes map[string]string) string {
	items := make([]string, 0, len(modes))
	for _, p := range slices.Sorted(maps.Keys(modes)) {
		items = append(items, p+"="+modes[p])
	}
	return strings.Join(items, ",")
}

// Ownership reads a child's contract.AnnotationOwnership: the modes of
// its fields left to other writers, by dotted path; nil without one.
func Ownership(obj *unstructured.Unstructured) map[string]string {
	v := obj.GetAnnotations()[contract.AnnotationOwnership]
	if v == "" {
		return nil
	}
	modes := map[string]string{}
	for item := range strings.SplitSeq(v, ",") {
		if p, mode, ok := strings.Cut(item, "="); ok {
			modes[p] = mode
		}
	}
	return modes
}

// CreateOnlyPaths are the child's CreateOnly paths, sorted.
func CreateOnlyPaths(obj *unstructured.Unstructured) []string {
	var paths []string
	for p, mode := range Ownership(obj) {
		if mode == contract.OwnershipCreateOnly {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	return paths
}

// withoutCreateOnly returns obj without the values of its CreateOnly
// paths: obj itself when it has none.
func withoutCreateOnly(obj *unstructured.Unstructured) *unstructured.Unstructured {
	paths := CreateOnlyPaths(obj)
	if len(paths) == 0 {
		return obj
	}
	out := obj.DeepCopy()
	for _, p := range paths {
		unstructured.RemoveNestedField(out.Object, strings.Split(p, ".")...)
	}
	return out
}

// KeepingLive returns what to apply of the desired child once it exists
// as live: desired itself when it leaves nothing to others; otherwise a
// copy where
//   - each CreateOnly path holds the live value, or is left out when the
//     live object has none (the template's value was for the creation);
//   - each Shared map also holds, at their live values, the live keys the
//     template does not set that the engine's apply owns (a key a
//     previous template set, or one a mutating webhook added to the
//     engine's own request), or every live key when a manager owns the
//     map whole (a map of x-kubernetes-map-type atomic). Left out, server-side
//     apply would remove them; keys other managers own are never sent, so
//     the engine takes no share in them and they stay theirs.
func KeepingLive(desired, live *unstructured.Unstructured) *unstructured.Unstructured {
	modes := Ownership(desired)
	if len(modes) == 0 {
		return desired
	}
	out := desired.DeepCopy()
	for _, p := range slices.Sorted(maps.Keys(modes)) {
		segs := strings.Split(p, ".")
		lv, found, _ := unstructured.NestedFieldNoCopy(live.Object, segs...)
		switch modes[p] {
		case contract.OwnershipCreateOnly:
			if !found {
				unstructured.RemoveNestedField(out.Object, segs...)
				continue
			}
			_ = unstructured.SetNestedField(out.Object, runtime.DeepCopyJSONValue(lv), segs...)
		case contract.OwnershipShared:
			lm, ok := lv.(map[string]any)
			if !found || !ok || len(lm) == 0 {
				continue
			}
			keys, whole := ownedKeys(live.GetManagedFields(), segs)
			want, _, _ := unstructured.NestedMap(out.Object, segs...) // a copy
			if want == nil {
				want = map[string]any{}
			}
			added := false
			for k, v := range lm {
				if _, set := want[k]; set || !whole && !keys[k] {
					continue
				}
				want[k], added = runtime.DeepCopyJSONValue(v), true
			}
			if added {
				_ = unstructured.SetNestedMap(out.Object, want, segs...)
			}
		}
	}
	return out
}

// ownedKeys reads the managed fields of a live object at the map at segs:
// the keys the engine's apply owns, and whether some manager owns the map
// whole (an atomic map: its node has no keys under it).
func ownedKeys(entries []metav1.ManagedFieldsEntry, segs []string) (keys map[string]bool, whole bool) {
	keys = map[string]bool{}
	for _, e := range entries {
		if e.FieldsV1 == nil || e.Subresource != "" {
			continue
		}
		var node map[string]any
		if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &node); err != nil {
			continue
		}
		for _, s := range segs {
			node, _ = node["f:"+s].(map[string]any)
			if node == nil {
				break
			}
		}
		if node == nil {
			continue
		}
		engine := e.Manager == contract.FieldManager && e.Operation == metav1.ManagedFieldsOperationApply
		n := 0
		for k := range node {
			if key, ok := strings.CutPrefix(k, "f:"); ok {
				n++
				if engine {
					keys[key] = true
				}
			}
		}
		if n == 0 {
			whole = true
		}
	}
	return keys, whole
}
