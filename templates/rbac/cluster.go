package rbac

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue/ast"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cuengine/engine/templates"
)

// ClusterOptions shape the role of one workload cluster.
type ClusterOptions struct {
	// Name of the ClusterRole and its binding.
	Name string
	// The subject the binding grants it to, in the workload cluster: the
	// identity of the kubeconfig its cluster Secret holds. User, when set;
	// otherwise ServiceAccount in Namespace.
	ServiceAccount string
	Namespace      string
	User           string
}

// ClusterRoles are the engine's rights in one workload cluster: a
// ClusterRole, since its cache there lists and watches each kind in every
// namespace, and its binding.
type ClusterRoles struct {
	ClusterRole        *rbacv1.ClusterRole
	ClusterRoleBinding *rbacv1.ClusterRoleBinding
	// Templates are the paths of the templates whose policy.clusters
	// allows the cluster, sorted; none: the cluster needs no role.
	Templates []string
}

// Objects are the role and its binding in the order to apply them.
func (r *ClusterRoles) Objects() []any { return []any{r.ClusterRole, r.ClusterRoleBinding} }

// remoteVerbs are what the engine does with its children in a workload
// cluster (reconciler/remote*.go): its cache lists and watches them, it
// reads one whose name is taken from the apiserver (get), creates and
// changes them by server-side apply (patch, and create for the apply that
// creates) and deletes them. It never updates one: no "update".
var remoteVerbs = []string{"get", "list", "watch", "create", "patch", "delete"}

// GenerateCluster returns the role the engine needs in the workload
// cluster named cluster for the set's templates: the kinds of the
// children that may be put there (ClusterChildKinds), with remoteVerbs,
// bound to the subject of opts. The engine's probe of a cluster (a
// SelfSubjectReview) and its discovery need no grant.
func GenerateCluster(set *templates.Set, cluster string, opts ClusterOptions) *ClusterRoles {
	byGroup := map[string][]string{}
	var paths []string
	for _, t := range set.Templates() {
		if !t.Policy.Clusters.Allows(cluster) {
			continue
		}
		paths = append(paths, t.Path)
		for _, gvk := range ClusterChildKinds(t, cluster) {
			byGroup[gvk.Group] = append(byGroup[gvk.Group], resourceOf(gvk))
		}
	}
	rules := []rbacv1.PolicyRule{}
	for _, group := range slices.Sorted(maps.Keys(byGroup)) {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{group},
			Resources: slices.Compact(slices.Sorted(slices.Values(byGroup[group]))), Verbs: remoteVerbs})
	}
	labels := map[string]string{"app.kubernetes.io/name": "engine", "app.kubernetes.io/managed-by": "engine"}
	subject := rbacv1.Subject{Kind: "ServiceAccount", Name: opts.ServiceAccount, Namespace: opts.Namespace}
	if opts.User != "" {
		subject = rbacv1.Subject{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: opts.User}
	}
	slices.Sort(paths)
	role, binding := clusterRoleAndBinding(opts.Name, labels, rules, subject)
	return &ClusterRoles{
		ClusterRole:        role,
		ClusterRoleBinding: binding,
		Templates:          paths,
	}
}

// ClusterChildKinds returns the kinds of the template's children that may
// be put in the named workload cluster, sorted: none unless its
// policy.clusters allows the cluster; then each child whose cluster field
// names it literally, and each whose cluster field is computed (from the
// spec: it may name any cluster the policy allows). A child without a
// cluster field stays in the engine's own cluster. A child's kind and
// cluster are read from the template evaluated without a parent and, for
// the children only a parent shows (behind an if), from the source as
// written; a kind the source computes is not known here (Warnings says so
// at its line).
func ClusterChildKinds(t *templates.Template, cluster string) []schema.GroupVersionKind {
	if !t.Policy.Clusters.Allows(cluster) {
		return nil
	}
	// Where each child may go, as the source writes its cluster field
	// (literal, or "" computed) and as the template evaluated without a
	// parent shows it.
	type child struct {
		written []string
		kinds   []schema.GroupVersionKind
	}
	children := map[string]*child{}
	get := func(name string) *child {
		c := children[name]
		if c == nil {
			c = &child{}
			children[name] = c
		}
		return c
	}
	for _, d := range ownChildDecls(t) {
		c := get(d.name)
		apiVersion, kind := "", ""
		for _, fd := range d.fields {
			switch label, _, _ := ast.LabelName(fd.Label); label {
			case "apiVersion":
				apiVersion = stringLit(fd.Value)
			case "kind":
				kind = stringLit(fd.Value)
			case "cluster":
				c.written = append(c.written, stringLit(fd.Value))
			}
		}
		if gv, err := schema.ParseGroupVersion(apiVersion); err == nil && apiVersion != "" && kind != "" {
			c.kinds = append(c.kinds, gv.WithKind(kind))
		}
	}
	evaluated := t.ChildClusters()
	for name := range evaluated {
		get(name)
	}
	var out []schema.GroupVersionKind
	for name, c := range children {
		target, ok := evaluated[name]
		switch {
		case ok && target != "":
			// Concrete without a parent: exactly there.
			if target != cluster {
				continue
			}
		case ok:
			// Computed: any cluster the policy allows.
		case !slices.Contains(c.written, "") && !slices.Contains(c.written, cluster):
			continue // local, or only elsewhere
		}
		if gvk, ok := t.ChildKind(name); ok {
			c.kinds = append(c.kinds, gvk)
		}
		out = append(out, c.kinds...)
	}
	slices.SortFunc(out, func(a, b schema.GroupVersionKind) int {
		return strings.Compare(a.Group+"/"+a.Kind+"/"+a.Version, b.Group+"/"+b.Kind+"/"+b.Version)
	})
	return slices.Compact(out)
}

// stringLit is a string literal's value, "" for any other expression.
func stringLit(e ast.Expr) string {
	if !isStringLit(e) {
		return ""
	}
	s, err := strconv.Unquote(e.(*ast.BasicLit).Value)
	if err != nil {
		return ""
	}
	return s
}
