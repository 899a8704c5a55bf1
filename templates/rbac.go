package templates

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// RBACOptions shape the generated roles.
type RBACOptions struct {
	// Name of the ClusterRole, the Roles and their bindings.
	Name string
	// ServiceAccount and its Namespace are the subject of the bindings.
	// Namespace is also where the engine's leases are (its leader election
	// and shard Leases: engine run --leader-election-namespace).
	ServiceAccount string
	Namespace      string
	// RevisionNamespace holds the templates' revisions (engine run
	// --revision-namespace); empty: Namespace.
	RevisionNamespace string
	// InstallCRDs adds what `engine run --install-crds` needs.
	InstallCRDs bool
}

// Roles are the engine's rights: a ClusterRole for what is cluster-wide by
// nature (the templated kinds and their children in every namespace), and a
// Role per namespace of the engine's own objects, so that it can neither
// touch other controllers' leases nor other workloads' revisions.
type Roles struct {
	ClusterRole        *rbacv1.ClusterRole
	ClusterRoleBinding *rbacv1.ClusterRoleBinding
	// Roles and RoleBindings, one each per namespace: Namespace first, then
	// RevisionNamespace if it differs.
	Roles        []*rbacv1.Role
	RoleBindings []*rbacv1.RoleBinding
}

// Objects are the roles and bindings in the order to apply them.
func (r *Roles) Objects() []any {
	out := []any{r.ClusterRole, r.ClusterRoleBinding}
	for i := range r.Roles {
		out = append(out, r.Roles[i], r.RoleBindings[i])
	}
	return out
}

// Verbs of the generated rules.
var (
	readWrite = []string{"get", "list", "watch", "create", "update", "patch"}
	allVerbs  = []string{"get", "list", "watch", "create", "update", "patch", "delete"}
)

// RBAC returns the least-privilege roles of an engine serving the set and
// their bindings. The ClusterRole holds the parent kinds (read, and update
// for the finalizer and the resource records), their status, the child
// kinds the templates can produce (as far as ChildKinds sees), the kinds
// they reference (read only: get, list and watch; as far as ReferenceKinds
// sees), events, the
// TokenReviews and SubjectAccessReviews that guard the metrics endpoint,
// and, with InstallCRDs, CustomResourceDefinitions: read, create, and
// update only of the templates' own. The Roles hold the leases (in
// Namespace) and the ControllerRevisions (in RevisionNamespace).
func RBAC(set *Set, opts RBACOptions) *Roles {
	parents := map[string][]string{}
	children := map[string][]string{}
	referenced := map[string][]string{}
	var crds []string
	for _, t := range set.Templates() {
		plural := t.crd.Spec.Names.Plural
		parents[t.GVK.Group] = append(parents[t.GVK.Group], plural, plural+"/status", plural+"/finalizers")
		crds = append(crds, t.crd.Name)
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
			Verbs: allVerbs})
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
		// Who may read /metrics (engine run --metrics-secure): the
		// apiserver authenticates the scraper's token and authorizes it.
		rbacv1.PolicyRule{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	)
	if opts.InstallCRDs {
		// RBAC cannot name the object of a create, a list or a watch (the
		// cache reads CRDs through an informer); updates and patches (a
		// server-side apply) are limited to the templates' own CRDs.
		rules = append(rules,
			rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch", "create"}},
			rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"update", "patch"},
				ResourceNames: slices.Compact(slices.Sorted(slices.Values(crds)))},
		)
	}

	labels := map[string]string{"app.kubernetes.io/name": "engine", "app.kubernetes.io/managed-by": "engine"}
	subjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: opts.ServiceAccount, Namespace: opts.Namespace}}
	out := &Roles{
		ClusterRole: &rbacv1.ClusterRole{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: metav1.ObjectMeta{Name: opts.Name, Labels: labels},
			Rules:      rules,
		},
		ClusterRoleBinding: &rbacv1.ClusterRoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: opts.Name, Labels: labels},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: opts.Name},
			Subjects:   subjects,
		},
	}
	// The leader election Lease and the shards' Leases.
	leases := rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: readWrite}
	// The templates' revisions and their rollouts (package revisions).
	revisions := rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"controllerrevisions"}, Verbs: allVerbs}
	byNamespace := []struct {
		ns    string
		rules []rbacv1.PolicyRule
	}{{opts.Namespace, []rbacv1.PolicyRule{leases, revisions}}}
	if rns := cmp.Or(opts.RevisionNamespace, opts.Namespace); rns != opts.Namespace {
		byNamespace = []struct {
			ns    string
			rules []rbacv1.PolicyRule
		}{{opts.Namespace, []rbacv1.PolicyRule{leases}}, {rns, []rbacv1.PolicyRule{revisions}}}
	}
	for _, n := range byNamespace {
		out.Roles = append(out.Roles, &rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
			ObjectMeta: metav1.ObjectMeta{Name: opts.Name, Namespace: n.ns, Labels: labels},
			Rules:      n.rules,
		})
		out.RoleBindings = append(out.RoleBindings, &rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: opts.Name, Namespace: n.ns, Labels: labels},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: opts.Name},
			Subjects:   subjects,
		})
	}
	return out
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
