package templates

import (
	"maps"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// RBACOptions shape the generated role.
type RBACOptions struct {
	// Name of the ClusterRole and ClusterRoleBinding.
	Name string
	// ServiceAccount and its Namespace are the subject of the binding.
	ServiceAccount string
	Namespace      string
	// InstallCRDs adds what `engine run --install-crds` needs.
	InstallCRDs bool
}

// RBAC returns the least-privilege ClusterRole of an engine serving the set,
// and its binding: the parent kinds (read, and update for the finalizer and
// the resource records), their status, the child kinds the templates can
// produce (as far as ChildKinds sees), the kinds they reference (read only:
// get, list and watch; as far as ReferenceKinds sees), events, the leader
// election lease, and, with InstallCRDs, CustomResourceDefinitions.
func RBAC(set *Set, opts RBACOptions) (*rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding) {
	parents := map[string][]string{}
	children := map[string][]string{}
	referenced := map[string][]string{}
	for _, t := range set.Templates() {
		plural := t.crd.Spec.Names.Plural
		parents[t.GVK.Group] = append(parents[t.GVK.Group], plural, plural+"/status", plural+"/finalizers")
		for _, gvk := range t.ChildKinds() {
			children[gvk.Group] = append(children[gvk.Group], resourceOf(gvk))
		}
		for _, gvk := range t.ReferenceKinds() {
			referenced[gvk.Group] = append(referenced[gvk.Group], resourceOf(gvk))
		}
	}
	var rules []rbacv1.PolicyRule
	for _, group := range slices.Sorted(maps.Keys(parents)) {
		res := slices.Compact(slices.Sorted(slices.Values(parents[group])))
		var main, status, finalizers []string
		for _, r := range res {
			switch {
			case strings.HasSuffix(r, "/status"):
				status = append(status, r)
			case strings.HasSuffix(r, "/finalizers"):
				finalizers = append(finalizers, r)
			default:
				main = append(main, r)
			}
		}
		rules = append(rules,
			rbacv1.PolicyRule{APIGroups: []string{group}, Resources: main, Verbs: []string{"get", "list", "watch", "update", "patch"}},
			rbacv1.PolicyRule{APIGroups: []string{group}, Resources: status, Verbs: []string{"get", "update", "patch"}},
			rbacv1.PolicyRule{APIGroups: []string{group}, Resources: finalizers, Verbs: []string{"update"}},
		)
	}
	for _, group := range slices.Sorted(maps.Keys(children)) {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{group}, Resources: slices.Compact(slices.Sorted(slices.Values(children[group]))),
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}})
	}
	for _, group := range slices.Sorted(maps.Keys(referenced)) {
		// Read only; a kind that is also a child kind has its rule above.
		res := slices.DeleteFunc(slices.Compact(slices.Sorted(slices.Values(referenced[group]))), func(r string) bool {
			return slices.Contains(children[group], r)
		})
		if len(res) > 0 {
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{group}, Resources: res, Verbs: []string{"get", "list", "watch"}})
		}
	}
	rules = append(rules,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		rbacv1.PolicyRule{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch"}},
		// The templates' revisions and their rollouts (package revisions).
		rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"controllerrevisions"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
	)
	if opts.InstallCRDs {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch"}})
	}
	labels := map[string]string{"app.kubernetes.io/name": "engine", "app.kubernetes.io/managed-by": "engine"}
	role := &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: opts.Name, Labels: labels},
		Rules:      rules,
	}
	binding := &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: opts.Name, Labels: labels},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: opts.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: opts.ServiceAccount, Namespace: opts.Namespace}},
	}
	return role, binding
}

// irregularResources are kinds whose resource name is not the usual plural.
var irregularResources = map[string]string{"Endpoints": "endpoints"}

// resourceOf guesses a kind's resource name offline, with the pluraliser
// the CRDs are named by.
func resourceOf(gvk schema.GroupVersionKind) string {
	if r, ok := irregularResources[gvk.Kind]; ok {
		return r
	}
	return plural(strings.ToLower(gvk.Kind))
}
