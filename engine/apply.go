package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cuengine/engine/templates"
)

// observe lists the parent's existing children of every kind the controller
// watches, from the label-selected child cache.
func (r *reconciler) observe(ctx context.Context, parent *unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, gvk := range r.kc.watchedChildKinds() {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		// The cached objects are only read, never modified: no deep copy.
		if err := r.e.children.List(ctx, list, client.MatchingFields{indexParentUID: string(parent.GetUID())}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing %s children: %w", gvk.Kind, err)
		}
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// observedState is what the template sees as observed: each existing child's
// content by its local name.
func observedState(existing []*unstructured.Unstructured) map[string]any {
	observed := make(map[string]any, len(existing))
	for _, c := range existing {
		if name := c.GetLabels()[LabelChild]; name != "" {
			observed[name] = c.Object
		}
	}
	return observed
}

// desiredChildren turns the template's children into the objects to apply,
// enforcing the template's policy; a refused child is recorded on the status.
func (r *reconciler) desiredChildren(t *templates.Template, parent *unstructured.Unstructured, out *templates.Result, st *statusUpdate) []*unstructured.Unstructured {
	var desired []*unstructured.Unstructured
	for _, c := range out.Children {
		obj, err := Desired(parent, t.Policy, r.e.scoper, c)
		if err != nil {
			st.syncFailed(ReasonChildRefused, err.Error())
			continue
		}
		desired = append(desired, obj)
	}
	// Namespaces first, then the rest in the template's order, as kubectl
	// and Helm do: a child in a namespace the template also creates can be
	// applied in the same reconcile.
	sort.SliceStable(desired, func(i, j int) bool {
		return desired[i].GetKind() == "Namespace" && desired[j].GetKind() != "Namespace"
	})
	return desired
}

// needsFinalizer: children without an owner reference (in other namespaces,
// or cluster-scoped) are not garbage-collected, so the engine deletes them.
func needsFinalizer(desired []*unstructured.Unstructured) bool {
	for _, d := range desired {
		if len(d.GetOwnerReferences()) == 0 {
			return true
		}
	}
	return false
}

// applyChildren server-side applies every desired child that is missing or
// differs from what was last applied, and returns the number of writes.
// A child whose name is held by an object this parent does not control is
// left untouched and reported as a ChildConflict.
func (r *reconciler) applyChildren(ctx context.Context, parent *unstructured.Unstructured, desired, existing []*unstructured.Unstructured, st *statusUpdate) (int, error) {
	writes := 0
	for _, d := range desired {
		if err := r.kc.watchChildren(ctx, d.GroupVersionKind()); err != nil {
			return writes, err
		}
		cur := find(existing, d)
		if cur == nil {
			_, owner, err := foreignOwner(ctx, r.e.apiReader, parent, d)
			if err != nil {
				return writes, err
			}
			if owner != "" {
				st.syncFailed(ReasonChildConflict, fmt.Sprintf("%s %s/%s exists and is not controlled by this %s (%s); it is left untouched",
					d.GetKind(), d.GetNamespace(), d.GetName(), parent.GetKind(), owner))
				continue
			}
		}
		hash := appliedHash(d)
		if cur != nil && cur.GetAnnotations()[AnnotationAppliedHash] == hash && contains(cur.Object, d.Object) {
			continue // already as desired: no write
		}
		obj := d.DeepCopy()
		setAnnotation(obj, AnnotationAppliedHash, hash)
		if err := r.e.writer.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
			if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsForbidden(err) {
				// The apiserver refuses what the template produced:
				// retrying will not help until something changes.
				st.syncFailed(ReasonApplyFailed, fmt.Sprintf("applying %s %s: %v", d.GetKind(), d.GetName(), err))
				continue
			}
			return writes, fmt.Errorf("applying %s %s: %w", d.GetKind(), d.GetName(), err)
		}
		writes++
		if cur == nil {
			r.normal(parent, "Created", "Create", "Created %s %s", d.GetKind(), d.GetName())
		} else {
			r.normal(parent, "Updated", "Update", "Updated %s %s", d.GetKind(), d.GetName())
		}
		log.FromContext(ctx).V(1).Info("applied child", "child", d.GetLabels()[LabelChild], "object", d.GetNamespace()+"/"+d.GetName())
	}
	return writes, nil
}

// find returns the existing child that is the same object as desired.
func find(existing []*unstructured.Unstructured, desired *unstructured.Unstructured) *unstructured.Unstructured {
	for _, c := range existing {
		if sameObject(c, desired) {
			return c
		}
	}
	return nil
}

func sameObject(a, b *unstructured.Unstructured) bool {
	return a.GroupVersionKind().GroupKind() == b.GroupVersionKind().GroupKind() &&
		a.GetNamespace() == b.GetNamespace() && a.GetName() == b.GetName() &&
		a.GetLabels()[LabelChild] == b.GetLabels()[LabelChild]
}

// foreignOwner reads the object a new child would replace, from the
// apiserver (the child cache holds only the engine's objects). It returns
// the live object, or nil when there is none, and "" when it belongs to
// this parent or else a description of who controls it. The reconciler and
// engine diff decide "ours or not" here, and nowhere else.
func foreignOwner(ctx context.Context, reader client.Reader, parent, desired *unstructured.Unstructured) (*unstructured.Unstructured, string, error) {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(desired.GroupVersionKind())
	err := reader.Get(ctx, client.ObjectKeyFromObject(desired), live)
	if apierrors.IsNotFound(err) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading %s %s: %w", desired.GetKind(), desired.GetName(), err)
	}
	if ref := metav1.GetControllerOfNoCopy(live); ref != nil {
		if ref.UID == parent.GetUID() {
			return live, "", nil
		}
		return live, fmt.Sprintf("controlled by %s %s", ref.Kind, ref.Name), nil
	}
	if live.GetLabels()[LabelParentUID] == string(parent.GetUID()) {
		return live, "", nil
	}
	return live, "not created by the engine", nil
}

// appliedHash identifies a desired object, so an unchanged one is not
// applied again.
func appliedHash(obj *unstructured.Unstructured) string {
	b, _ := json.Marshal(obj.Object) // map keys are sorted: stable
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

func setAnnotation(obj *unstructured.Unstructured, key, value string) {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[key] = value
	obj.SetAnnotations(a)
}

// contains reports whether every field of want is present with the same
// value in have: the live object may carry more (defaults, status), but
// nothing the engine applied may have drifted.
func contains(have, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			hv, ok := h[k]
			if !ok || !contains(hv, wv) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !contains(h[i], w[i]) {
				return false
			}
		}
		return true
	case int64:
		return numberEqual(have, float64(w))
	case float64:
		return numberEqual(have, w)
	case int:
		return numberEqual(have, float64(w))
	default:
		return have == want
	}
}

func numberEqual(have any, want float64) bool {
	switch h := have.(type) {
	case int64:
		return float64(h) == want
	case float64:
		return h == want
	case int:
		return float64(h) == want
	}
	return false
}
