package render

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates"
	"github.com/cuengine/engine/templates/policy"
)

// ResolveReferences evaluates the template's references for the parent,
// within the evaluation timeout, and places each: a namespaced kind's
// namespace defaults to the parent's, a cluster-scoped kind has none. A
// reference the template's policy does not allow (another namespace
// without policy.crossNamespace listing it, which is every namespace for a
// cluster-scoped parent, a cluster-scoped kind without policy.clusterScoped) is an *Error of reason
// contract.ReasonReferenceRefused: nothing is read for the parent.
func ResolveReferences(t *templates.Template, parent *unstructured.Unstructured, scoper Scoper, limits Limits) ([]templates.Reference, error) {
	if !t.HasReferences() {
		return nil, nil
	}
	if scoper == nil {
		scoper = OfflineScoper{}
	}
	refs, err := within(limits.WithDefaults().EvaluationTimeout, nil, func() ([]templates.Reference, error) { return t.References(parent) })
	if err != nil {
		return nil, err
	}
	var refused []string
	for i := range refs {
		if msg := place(&refs[i], parent, t.Policy, scoper); msg != "" {
			refused = append(refused, "reference "+refs[i].Name+": "+msg)
		}
	}
	if len(refused) > 0 {
		return nil, &Error{Reason: contract.ReasonReferenceRefused, Err: fmt.Errorf("%s", strings.Join(refused, "; "))}
	}
	return refs, nil
}

// place sets the reference's namespace and says why the policy refuses
// it, or "".
func place(ref *templates.Reference, parent *unstructured.Unstructured, pol policy.Policy, scoper Scoper) string {
	namespaced, err := scoper.Namespaced(ref.GVK)
	if err != nil {
		return fmt.Sprintf("unknown kind %s: %v", ref.GVK.GroupKind(), err)
	}
	switch {
	case !namespaced:
		ref.Namespace = ""
		if !pol.ClusterScoped {
			return fmt.Sprintf("%s is cluster-scoped; set policy: clusterScoped: true in the template to allow reading it", ref)
		}
	case ref.Namespace == "" && parent.GetNamespace() == "":
		return fmt.Sprintf("%s needs metadata.namespace: its parent is cluster-scoped", ref)
	case parent.GetNamespace() == "" && !pol.CrossNamespace.Any():
		return fmt.Sprintf("%s is in namespace %q; %s", ref, ref.Namespace, NoNamespaceOfItsOwn)
	case ref.Namespace == "" || ref.Namespace == parent.GetNamespace():
		ref.Namespace = parent.GetNamespace()
	case !pol.CrossNamespace.Any():
		return fmt.Sprintf("%s is in namespace %q, not the parent's %q; set policy: crossNamespace in the template to allow it", ref, ref.Namespace, parent.GetNamespace())
	case !pol.CrossNamespace.Allows(ref.Namespace):
		return fmt.Sprintf("%s is in namespace %q, which the template's policy.crossNamespace does not list (%s)", ref, ref.Namespace, strings.Join(pol.CrossNamespace.Names, ", "))
	}
	return ""
}

// Matches reports whether obj is what a placed reference names or selects.
func Matches(ref templates.Reference, obj *unstructured.Unstructured) bool {
	if obj.GroupVersionKind() != ref.GVK {
		return false
	}
	if ref.ByName() {
		return obj.GetNamespace() == ref.Namespace && obj.GetName() == ref.ObjectName
	}
	if ref.Namespace != "" && obj.GetNamespace() != ref.Namespace {
		return false
	}
	return labels.SelectorFromSet(ref.Selector).Matches(labels.Set(obj.GetLabels()))
}

// Observed is what the template sees of a placed reference, from the
// objects it matches (Matches): a by-name reference is the object's
// content, and does not exist (false) without one; a selector is
// {items: [...]} sorted by namespace and name, which exists even empty.
func Observed(ref templates.Reference, objs []*unstructured.Unstructured) (any, bool) {
	var matched []*unstructured.Unstructured
	for _, o := range objs {
		if Matches(ref, o) {
			matched = append(matched, o)
		}
	}
	if ref.ByName() {
		if len(matched) == 0 {
			return nil, false
		}
		return matched[0].Object, true
	}
	sortByKey(matched)
	items := make([]any, len(matched))
	for i, o := range matched {
		items[i] = o.Object
	}
	return map[string]any{"items": items}, true
}

// sortByKey sorts objects by namespace, then name.
func sortByKey(objs []*unstructured.Unstructured) {
	slices.SortFunc(objs, func(a, b *unstructured.Unstructured) int {
		return cmp.Or(cmp.Compare(a.GetNamespace(), b.GetNamespace()), cmp.Compare(a.GetName(), b.GetName()))
	})
}
