package render

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
)

// Holder is the object that already holds a new child's name, and what the
// parent may do with it (HolderOf).
type Holder struct {
	// Live is the object as read; nil when the name is free.
	Live *unstructured.Unstructured
	// Adopt: the object is not the parent's, but whoever may write it
	// granted it to this parent (contract.AnnotationAdoptBy), and no other
	// controller controls it. The parent takes it over.
	Adopt bool
	// Conflict, when not "", is why the object is left untouched: whose
	// it is, and how its owner can grant it when a grant would do.
	Conflict string
}

// HolderOf reads the object a new child would replace, from the apiserver
// (the child cache holds only the engine's objects), and decides what the
// parent may do with it: nothing to decide when it is the parent's own (by
// IsOurs's proof), adopt it when its owner granted it to this parent, and
// otherwise leave it untouched. The reconciler and engine diff decide here,
// and nowhere else.
//
// desired is a child that Desired accepted, so an object adopted in its
// place is where the template's policy lets children go: a grant never
// takes a child past the policy.
func HolderOf(ctx context.Context, reader client.Reader, parent, desired *unstructured.Unstructured) (Holder, error) {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(desired.GroupVersionKind())
	err := reader.Get(ctx, client.ObjectKeyFromObject(desired), live)
	if apierrors.IsNotFound(err) {
		return Holder{}, nil
	}
	if err != nil {
		return Holder{}, fmt.Errorf("reading %s %s: %w", desired.GetKind(), desired.GetName(), err)
	}
	h := Holder{Live: live}
	if IsOurs(parent, live, InventoryOf(parent), ProofsOf(parent)) {
		return h, nil
	}
	taken := fmt.Sprintf("%s %s/%s exists and is not controlled by this %s", desired.GetKind(), desired.GetNamespace(), desired.GetName(), parent.GetKind())
	if ref := metav1.GetControllerOfNoCopy(live); ref != nil {
		h.Conflict = fmt.Sprintf("%s (controlled by %s %s); it is left untouched: an object another controller controls is never adopted", taken, ref.Kind, ref.Name)
		return h, nil
	}
	grant, granted := live.GetAnnotations()[contract.AnnotationAdoptBy]
	switch {
	case !granted:
		h.Conflict = fmt.Sprintf("%s (not created by the engine for it); it is left untouched. To hand it over to this %s, its owner runs: %s; then %s adopts it",
			taken, parent.GetKind(), GrantCommand(parent, desired), ReconcileCommand(parent))
	case Grants(grant, parent):
		h.Adopt = true
	default:
		h.Conflict = fmt.Sprintf("%s (not created by the engine for it); it is left untouched: its %s grant names %q, not this %s (%s)", taken, contract.AnnotationAdoptBy, grant, parent.GetKind(), contract.ParentRef(parent))
	}
	return h, nil
}

// Grants reports whether the value of an object's contract.AnnotationAdoptBy
// names the parent: in ParentRef's format, or by its UID.
func Grants(grant string, parent *unstructured.Unstructured) bool {
	grant = strings.TrimSpace(grant)
	return grant == contract.ParentRef(parent) || (parent.GetUID() != "" && grant == string(parent.GetUID()))
}

// GrantCommand is the kubectl command that grants obj to the parent.
func GrantCommand(parent, obj *unstructured.Unstructured) string {
	return "kubectl annotate " + commandArgs(obj) + " " + contract.AnnotationAdoptBy + "=" + contract.ParentRef(parent)
}

// ReconcileCommand is the engine command that reconciles the parent now:
// a conflict is terminal, and a grant written on the object is no change
// the engine sees (it watches its own objects only).
func ReconcileCommand(parent *unstructured.Unstructured) string {
	return "engine reconcile " + commandArgs(parent)
}

// commandArgs names obj as kubectl and the engine's object commands take
// it: kind.group/name [-n namespace].
func commandArgs(obj *unstructured.Unstructured) string {
	gk := obj.GroupVersionKind().GroupKind()
	resource := strings.ToLower(gk.Kind)
	if gk.Group != "" {
		resource += "." + gk.Group
	}
	args := resource + "/" + obj.GetName()
	if obj.GetNamespace() != "" {
		args += " -n " + obj.GetNamespace()
	}
	return args
}
