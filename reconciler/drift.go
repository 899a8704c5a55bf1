package reconciler

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/internal/jsoncmp"
)

// Drift is judged as the apiserver stores values, not as the template
// writes them. The apiserver stores a valid child in its own canonical
// form: 0.5 CPU as "500m", "1024Mi" as "1Gi", and without the empty values
// it drops (args: [], an env entry's value: "", hostNetwork: false,
// annotations: {}). So a live child that does not literally contain the
// desired one (jsoncmp.Contains) has not drifted for that: a server-side
// dry-run apply of the desired child, as the engine applies it, says what
// the apiserver would make of it, and the child has drifted only when the
// live object differs from that on a field the engine applies
// (sameAsApplied). This is Flux's drift detection (fluxcd/pkg
// ssa/manager_apply.go: dry-run, then compare), narrowed to the engine's
// own fields.
//
// The verdict costs a request, so it is remembered (appliedVersions): the
// version of a child that the engine's own apply or create returned, or
// that a dry run found as desired, is known to be as desired as long as
// the child keeps that resource version and the template the same applied
// hash. A steady state then costs no request at all; a child whose status
// changes costs one dry run per new version.

// appliedVersions remembers, per parent, the version of each child known
// to be what applying its desired object makes it. It holds one entry per
// live child, the latest; a parent's entries for children it no longer has
// go at its next apply pass (keep), and all of them when the parent is
// gone (forget). Its lock is never held across a request.
//
// A parent's entries are a slice, not a map: a parent has a few children,
// and a map of one entry costs about 450 bytes where the slice costs 48
// (a heap profile of the bench, N=2000, showed 1.3 KiB per parent here).
type appliedVersions struct {
	mu       sync.Mutex
	byParent map[types.NamespacedName][]appliedVersion
}

// appliedVersion is a child's resource version and the applied hash of the
// desired object it is known to be as.
type appliedVersion struct {
	uid             types.UID
	resourceVersion string
	hash            string
}

// holds reports whether live, at its resource version, is known to be what
// applying the desired object of that hash makes it.
func (a *appliedVersions) holds(parent types.NamespacedName, live *unstructured.Unstructured, hash string) bool {
	uid, rv := live.GetUID(), live.GetResourceVersion()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, v := range a.byParent[parent] {
		if v.uid == uid {
			return v.hash == hash && v.resourceVersion == rv
		}
	}
	return false
}

// remember records that the child obj, at its resource version, is what
// applying the desired object of that hash makes it. An object without a
// uid or a resource version is not recorded.
func (a *appliedVersions) remember(parent types.NamespacedName, obj *unstructured.Unstructured, hash string) {
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	if uid == "" || rv == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.byParent == nil {
		a.byParent = map[types.NamespacedName][]appliedVersion{}
	}
	vs := a.byParent[parent]
	for i := range vs {
		if vs[i].uid == uid {
			vs[i].resourceVersion, vs[i].hash = rv, hash
			return
		}
	}
	a.byParent[parent] = append(vs, appliedVersion{uid: uid, resourceVersion: rv, hash: hash})
}

// keep drops the parent's entries for the children not in live, its
// children now.
func (a *appliedVersions) keep(parent types.NamespacedName, live []types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	vs := slices.DeleteFunc(a.byParent[parent], func(v appliedVersion) bool { return !slices.Contains(live, v.uid) })
	if len(vs) == 0 {
		delete(a.byParent, parent)
		return
	}
	a.byParent[parent] = vs
}

// forget drops every entry of a parent that is gone.
func (a *appliedVersions) forget(parent types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.byParent, parent)
}

// len returns the number of children remembered, for the tests.
func (a *appliedVersions) len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, vs := range a.byParent {
		n += len(vs)
	}
	return n
}

// storedAsDesired dry-runs the apply of the desired child obj (with its
// applied hash, field manager and forced ownership: the apply itself) and
// reports whether live, the child as the cache shows it, already holds what
// the apply would make of every field the engine applies. A live object
// older than the apiserver's is never judged as desired. The error is the
// dry run's, as the apply's would be.
func (r *Reconciler) storedAsDesired(ctx context.Context, obj, live *unstructured.Unstructured) (bool, error) {
	dry := obj.DeepCopy()
	if err := r.writer.Apply(ctx, client.ApplyConfigurationFromUnstructured(dry), client.FieldOwner(contract.FieldManager), client.ForceOwnership, client.DryRunAll); err != nil {
		return false, err
	}
	if dry.GetResourceVersion() != live.GetResourceVersion() {
		return false, nil // the cache is behind: apply, as before
	}
	return sameAsApplied(dry, live), nil
}

// sameAsApplied reports whether live holds the same values as applied, an
// object as the engine's apply makes it (the reply of a dry run), at every
// field the engine's apply manages in applied: its managed-fields entry.
// Fields other managers own, status and the metadata every write changes
// are not compared: the apply leaves them as they are. Without that entry,
// or with a field path it cannot read, it reports false: the caller then
// applies, which is always correct.
func sameAsApplied(applied, live *unstructured.Unstructured) bool {
	for _, e := range applied.GetManagedFields() {
		if e.Manager != contract.FieldManager || e.Operation != metav1.ManagedFieldsOperationApply || e.Subresource != "" || e.FieldsV1 == nil {
			continue
		}
		var set map[string]any
		if err := json.Unmarshal(e.FieldsV1.GetRawBytes(), &set); err != nil {
			return false
		}
		return sameFields(set, live.Object, applied.Object)
	}
	return false
}

// sameFields reports whether have and want hold the same values at every
// path of set, a field set in the managed fields' FieldsV1 form: "f:name"
// a field, "k:{...}" the item of a list with those keys, "v:..." the item
// of a set with that value, "i:n" the item at an index, "." the node
// itself. A path absent from both is the same; a leaf, a field owned as a
// whole (a scalar, an atomic list or map), is compared whole. Values
// compare as jsoncmp.Equal, numbers by value: a key of the field set
// decodes as float64 where the cache's objects hold int64.
func sameFields(set map[string]any, have, want any) bool {
	for k, sub := range set {
		if k == "." {
			continue
		}
		hv, hok, herr := member(have, k)
		wv, wok, werr := member(want, k)
		if herr != nil || werr != nil || hok != wok {
			return false
		}
		if !hok {
			continue
		}
		children, _ := sub.(map[string]any)
		if leaf(children) {
			if !jsoncmp.Equal(hv, wv) {
				return false
			}
			continue
		}
		if !sameFields(children, hv, wv) {
			return false
		}
	}
	return true
}

// leaf reports whether a field set's node has nothing under it but itself.
func leaf(children map[string]any) bool {
	for k := range children {
		if k != "." {
			return false
		}
	}
	return true
}

// errPathElement is a field path element sameFields cannot read.
type errPathElement string

func (e errPathElement) Error() string {
	return "unknown field path element " + strconv.Quote(string(e))
}

// member returns the value at one field path element of container, and
// whether it is there.
func member(container any, element string) (any, bool, error) {
	kind, arg, ok := strings.Cut(element, ":")
	if !ok {
		return nil, false, errPathElement(element)
	}
	switch kind {
	case "f":
		m, _ := container.(map[string]any)
		v, ok := m[arg]
		return v, ok, nil
	case "k":
		var keys map[string]any
		if err := json.Unmarshal([]byte(arg), &keys); err != nil {
			return nil, false, err
		}
		list, _ := container.([]any)
		for _, item := range list {
			m, _ := item.(map[string]any)
			if m != nil && hasKeys(m, keys) {
				return item, true, nil
			}
		}
		return nil, false, nil
	case "v":
		var want any
		if err := json.Unmarshal([]byte(arg), &want); err != nil {
			return nil, false, err
		}
		list, _ := container.([]any)
		for _, item := range list {
			if jsoncmp.Equal(item, want) {
				return item, true, nil
			}
		}
		return nil, false, nil
	case "i":
		i, err := strconv.Atoi(arg)
		if err != nil {
			return nil, false, err
		}
		list, _ := container.([]any)
		if i < 0 || i >= len(list) {
			return nil, false, nil
		}
		return list[i], true, nil
	}
	return nil, false, errPathElement(element)
}

func hasKeys(item, keys map[string]any) bool {
	for k, v := range keys {
		if iv, ok := item[k]; !ok || !jsoncmp.Equal(iv, v) {
			return false
		}
	}
	return true
}
