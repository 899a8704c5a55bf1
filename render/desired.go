package render

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates"
	"github.com/cuengine/engine/templates/policy"
)

// ChildError is a child the template may not produce: in another namespace,
// or cluster-scoped, without the template's policy allowing it.
type ChildError struct {
	Child string
	Msg   string
}

func (e *ChildError) Error() string { return "child " + e.Child + ": " + e.Msg }

// NoNamespaceOfItsOwn ends the refusal of a child or a reference of a
// cluster-scoped parent in a namespace, without policy.crossNamespace.
const NoNamespaceOfItsOwn = "a cluster-scoped parent has no namespace of its own: list the namespace in policy: crossNamespace in the template to allow it"

// Desired returns the object to apply for one child: the template's object
// with the namespace defaulted to the parent's, the engine's labels and
// annotations, and a controller owner reference when the child lives in the
// parent's namespace and the engine's cluster (a child put in a workload
// cluster carries contract.AnnotationCluster instead). It enforces the
// template's policy on where children go.
func Desired(parent *unstructured.Unstructured, pol policy.Policy, scoper Scoper, c templates.Child) (*unstructured.Unstructured, error) {
	obj := c.Object.DeepCopy()
	dropNulls(obj.Object)
	gvk := obj.GroupVersionKind()
	namespaced, err := scoper.Namespaced(gvk)
	if err != nil {
		return nil, &ChildError{Child: c.Name, Msg: fmt.Sprintf("unknown kind %s: %v", gvk.GroupKind(), err)}
	}
	if errs := validation.IsValidLabelValue(c.Name); len(errs) > 0 {
		return nil, &ChildError{Child: c.Name, Msg: "the local name must be a valid label value: " + strings.Join(errs, "; ")}
	}
	// A cluster-scoped parent has no namespace of its own: every namespace
	// it writes to is another namespace, allowed only by the policy.
	clusterParent := parent.GetNamespace() == ""
	owned := clusterParent
	switch {
	case !namespaced:
		if !pol.ClusterScoped {
			return nil, &ChildError{Child: c.Name, Msg: fmt.Sprintf("%s %q is cluster-scoped; set policy: clusterScoped: true in the template to allow it", gvk.Kind, obj.GetName())}
		}
		obj.SetNamespace("")
	case clusterParent && obj.GetNamespace() == "":
		return nil, &ChildError{Child: c.Name, Msg: fmt.Sprintf("%s %q needs metadata.namespace: its parent is cluster-scoped", gvk.Kind, obj.GetName())}
	case clusterParent && !pol.CrossNamespace.Any():
		return nil, &ChildError{Child: c.Name, Msg: fmt.Sprintf("%s %q is in namespace %q; %s", gvk.Kind, obj.GetName(), obj.GetNamespace(), NoNamespaceOfItsOwn)}
	case obj.GetNamespace() == "" || obj.GetNamespace() == parent.GetNamespace():
		obj.SetNamespace(parent.GetNamespace())
		owned = true
	case !pol.CrossNamespace.Any():
		return nil, &ChildError{Child: c.Name, Msg: fmt.Sprintf("%s %q is in namespace %q, not the parent's %q; set policy: crossNamespace: true in the template to allow it", gvk.Kind, obj.GetName(), obj.GetNamespace(), parent.GetNamespace())}
	case !pol.CrossNamespace.Allows(obj.GetNamespace()):
		return nil, &ChildError{Child: c.Name, Msg: fmt.Sprintf("%s %q is in namespace %q, which the template's policy.crossNamespace does not list (%s)", gvk.Kind, obj.GetName(), obj.GetNamespace(), strings.Join(pol.CrossNamespace.Names, ", "))}
	}
	if c.Cluster != "" {
		// In a workload cluster: the garbage collector there cannot see
		// the parent, so no owner reference; the parent's inventory and
		// the engine's finalizer own it.
		if msg := pol.ClusterRefusal(gvk.Kind, obj.GetName(), c.Cluster); msg != "" {
			return nil, &ChildError{Child: c.Name, Msg: msg}
		}
		owned = false
	}
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[contract.LabelManagedBy] = contract.ManagedByValue
	if uid := parent.GetUID(); uid != "" { // empty in offline render
		labels[contract.LabelParentUID] = string(uid)
	}
	labels[contract.LabelChild] = c.Name
	if shard := parent.GetLabels()[contract.LabelShard]; shard != "" {
		// The shard's child cache selects it; a parent that moved takes
		// its children along with its next apply.
		labels[contract.LabelShard] = shard
	}
	obj.SetLabels(labels)
	annotations := obj.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[contract.AnnotationParent] = contract.ParentRef(parent)
	if c.Cluster != "" {
		annotations[contract.AnnotationCluster] = c.Cluster
	}
	if len(c.DependsOn) > 0 {
		annotations[contract.AnnotationDependsOn] = strings.Join(c.DependsOn, ",")
	}
	if len(c.Ownership) > 0 {
		annotations[contract.AnnotationOwnership] = formatOwnership(c.Ownership) // leftfields.go
	}
	obj.SetAnnotations(annotations)
	if owned && parent.GetUID() != "" {
		obj.SetOwnerReferences([]metav1.OwnerReference{controllerRef(parent)})
	}
	return obj, nil
}

// controllerRef is the owner reference of a child to its parent: the
// garbage collector deletes the child with the parent.
func controllerRef(parent *unstructured.Unstructured) metav1.OwnerReference {
	return *metav1.NewControllerRef(parent, parent.GroupVersionKind())
}

// dropNulls removes every field whose value is null, at any depth (in the
// structs of lists too), so that a template's null means one thing
// wherever it is: the field is not set. Server-side apply reads a null in
// an applied object so, but the engine's own merges did not (labels and
// annotations read through unstructured's null-coercing getters, where
// null became ""), nor do a create and the drift check. A list's elements
// are kept: a null there is a value, not a field.
func dropNulls(m map[string]any) {
	for k, v := range m {
		switch x := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			dropNulls(x)
		case []any:
			for _, e := range x {
				if em, ok := e.(map[string]any); ok {
					dropNulls(em)
				}
			}
		}
	}
}
