package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// applyChildren server-side applies every desired child that is missing or
// differs from what was last applied, and returns the number of writes. A
// child whose name is held by an object this parent does not control is
// left untouched (ChildConflict); a child the apiserver refuses is a
// terminal problem of its own (ApplyFailed); the others go on.
func (r *reconciler) applyChildren(ctx context.Context, parent *unstructured.Unstructured, desired []*unstructured.Unstructured, live *liveChildren, st *status) (int, error) {
	writes := 0
	for _, d := range desired {
		if err := r.children.watch(ctx, d.GroupVersionKind()); err != nil {
			return writes, err
		}
		cur := live.get(d)
		if cur == nil {
			_, owner, err := foreignOwner(ctx, r.live, parent, d)
			if err != nil {
				return writes, err
			}
			if owner != "" {
				st.fail(ReasonChildConflict, terminalError(ReasonChildConflict, fmt.Errorf("%s %s/%s exists and is not controlled by this %s (%s); it is left untouched",
					d.GetKind(), d.GetNamespace(), d.GetName(), parent.GetKind(), owner)))
				continue
			}
		}
		hash := appliedHash(d)
		if cur != nil && cur.GetAnnotations()[AnnotationAppliedHash] == hash && contains(cur.Object, d.Object) {
			continue // already as desired: no write
		}
		obj := d.DeepCopy()
		setAnnotation(obj, AnnotationAppliedHash, hash)
		if err := r.writer.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
			err = fmt.Errorf("applying %s %s: %w", d.GetKind(), d.GetName(), err)
			if class, _, _ := classify(err, 0); class == terminal {
				st.fail(ReasonApplyFailed, terminalError(ReasonApplyFailed, err))
				continue
			}
			return writes, err
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
	if isOurs(parent, live, inventoryOf(parent)) {
		return live, "", nil
	}
	if ref := metav1.GetControllerOfNoCopy(live); ref != nil {
		return live, fmt.Sprintf("controlled by %s %s", ref.Kind, ref.Name), nil
	}
	return live, "not created by the engine for it", nil
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
