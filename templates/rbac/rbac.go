package rbac

import (
	"cmp"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/format"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cuengine/engine/templates"
	"github.com/cuengine/engine/templates/policy"
)

// Options shape the generated roles.
type Options struct {
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
	// ClustersNamespace holds the Secrets that register the workload
	// clusters (engine run --clusters-namespace), read while a template's
	// policy.clusters allows one; empty: Namespace, "-": none.
	ClustersNamespace string
}

// Roles are the engine's rights: a ClusterRole for what is cluster-wide by
// nature (the templated kinds and their children in every namespace), and a
// Role per namespace of the engine's own objects, so that it can neither
// touch other controllers' leases nor other workloads' revisions.
type Roles struct {
	ClusterRole        *rbacv1.ClusterRole
	ClusterRoleBinding *rbacv1.ClusterRoleBinding
	// Roles and RoleBindings, one each per namespace: Namespace first, then
	// RevisionNamespace if it differs, then the namespaces of referenced
	// Secrets and ConfigMaps granted there only and ClustersNamespace,
	// sorted.
	Roles        []*rbacv1.Role
	RoleBindings []*rbacv1.RoleBinding
	// Notes say which referenced Secrets are granted cluster-wide, and
	// why (engine rbac prints them on standard error).
	Notes []string
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

// Generate returns the least-privilege roles of an engine serving the set and
// their bindings. The ClusterRole holds the parent kinds (read, and update
// for the finalizer and the resource records), their status, the child
// kinds the templates can produce (as far as ChildKinds sees), the kinds
// they reference (read only: get, list and watch; as far as ReferenceKinds
// sees; Secrets and ConfigMaps in the namespaces the references reach when
// each is known, see referenceNamespaces), events, the
// TokenReviews and SubjectAccessReviews that guard the metrics endpoint,
// and, with InstallCRDs, CustomResourceDefinitions: read, create, and
// update only of the templates' own. The Roles hold the leases (in
// Namespace), the ControllerRevisions (in RevisionNamespace) and, when a
// template's policy.clusters allows a workload cluster, read access to
// the Secrets that register the clusters (in ClustersNamespace).
func Generate(set *templates.Set, opts Options) *Roles {
	kinds := kindsOf(set)
	inNamespaces, notes := namespacedReferences(set, kinds.children, kinds.referenced)
	// The Secrets that register the workload clusters, in their namespace
	// only, when a template may put children in one.
	if cns := cmp.Or(opts.ClustersNamespace, opts.Namespace); cns != "-" && allowsClusters(set) &&
		!slices.ContainsFunc(inNamespaces[cns], func(r rbacv1.PolicyRule) bool { return sameRule(r, clusterSecrets) }) {
		inNamespaces[cns] = append(inNamespaces[cns], clusterSecrets)
	}
	rules := slices.Concat(
		parentRules(kinds.parents),
		childRules(kinds.children),
		referenceRules(kinds.referenced, kinds.children),
		engineRules(),
		crdRules(kinds.crds, kinds.converting, opts.InstallCRDs),
	)

	labels := map[string]string{"app.kubernetes.io/name": "engine", "app.kubernetes.io/managed-by": "engine"}
	subjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: opts.ServiceAccount, Namespace: opts.Namespace}}
	role, binding := clusterRoleAndBinding(opts.Name, labels, rules, subjects[0])
	out := &Roles{
		ClusterRole:        role,
		ClusterRoleBinding: binding,
		Notes:              notes,
	}
	for _, n := range namespaceRoles(opts, inNamespaces) {
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

// clusterSecrets reads the cluster Secrets (package clusters): an
// informer lists and watches them by label, which RBAC cannot name.
var clusterSecrets = rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}}

// allowsClusters reports whether a template of the set may put children
// in a workload cluster.
func allowsClusters(set *templates.Set) bool {
	return slices.ContainsFunc(set.Templates(), func(t *templates.Template) bool { return t.Policy.Clusters.Any() })
}

// sameRule reports whether two rules grant alike, field by field.
func sameRule(a, b rbacv1.PolicyRule) bool {
	return slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) && slices.Equal(a.Verbs, b.Verbs) &&
		slices.Equal(a.ResourceNames, b.ResourceNames) && slices.Equal(a.NonResourceURLs, b.NonResourceURLs)
}

// namespaceRules are the rules of one namespace's Role.
type namespaceRules struct {
	ns    string
	rules []rbacv1.PolicyRule
}

// namespacedReferenceKinds are the referenced kinds RBAC grants only in
// the namespaces the references reach, when they are known: kinds known
// to be namespaced without a cluster.
var namespacedReferenceKinds = []schema.GroupVersionKind{{Version: "v1", Kind: "ConfigMap"}, {Version: "v1", Kind: "Secret"}}

// referenceNamespaces returns the namespaces the templates' references of
// gvk can read from, sorted; or, when one can read from any namespace,
// why. A reference with a literal metadata.namespace reaches that one;
// one without reaches its parent's namespace, any for a namespaced
// parent, and for a cluster-scoped parent those its policy.crossNamespace
// lists (its parent has no namespace).
func referenceNamespaces(set *templates.Set, gvk schema.GroupVersionKind) (namespaces, why []string) {
	for _, t := range set.Templates() {
		for _, ref := range t.DeclaredReferences() {
			switch {
			case ref.GVK != gvk:
			case ref.Namespace != "":
				namespaces = append(namespaces, ref.Namespace)
			case t.CRD().Spec.Scope != apiextensionsv1.ClusterScoped:
				why = append(why, fmt.Sprintf("%s references.%s reads from its parent's namespace, which can be any", t.Path, ref.Name))
			case t.Policy.CrossNamespace.All:
				why = append(why, fmt.Sprintf("%s references.%s computes its namespace, and policy.crossNamespace allows every namespace", t.Path, ref.Name))
			default:
				namespaces = append(namespaces, t.Policy.CrossNamespace.Names...)
			}
		}
	}
	return slices.Compact(slices.Sorted(slices.Values(namespaces))), why
}

// irregularResources are kinds whose resource name is not the usual plural.
var irregularResources = map[string]string{"Endpoints": "endpoints"}

// resourceOf guesses a kind's resource name offline, with the pluraliser
// the CRDs are named by.
func resourceOf(gvk schema.GroupVersionKind) string {
	if r, ok := irregularResources[gvk.Kind]; ok {
		return r
	}
	return templates.Plural(strings.ToLower(gvk.Kind))
}

// Warning is a child whose kind or namespace the source does not say
// literally, so that engine rbac cannot grant it, or the template's policy
// may refuse it: a warning of engine vet and engine rbac, never an error.
type Warning struct {
	// Pos is where the child's apiVersion, kind or namespace is written,
	// file:line:col relative to the templates directory.
	Pos string
	// Child is the child's local name, as the source writes it.
	Child string
	Msg   string
}

func (w Warning) String() string { return w.Pos + ": children." + w.Child + ": " + w.Msg }

// Warnings returns the children of the template whose apiVersion or
// kind is computed (from the spec, or any expression other than a string),
// unless the evaluated template shows a kind RBAC grants; and those whose
// namespace is computed from the parent's spec while the template's policy
// does not allow every namespace.
func Warnings(t *templates.Template) []Warning {
	var out []Warning
	for _, c := range ownChildDecls(t) {
		out = append(out, warnings(t, c)...)
	}
	return out
}

// ownChildDecls are the children the template's own files declare (not
// the packages it imports), file by file in name order. A file is parsed
// under its name relative to the templates directory, as positions are
// written; one that does not parse is skipped: compile reported it.
func ownChildDecls(t *templates.Template) []childDecl {
	var out []childDecl
	files := t.Files()
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if name != t.Path && filepath.Dir(name) != t.Path {
			continue // a package it imports
		}
		f, err := parser.ParseFile(name, files[name])
		if err != nil {
			continue
		}
		out = append(out, childDecls(f.Decls)...)
	}
	return out
}

// childDecl is a child as the source declares it: its label and the
// fields of its object the source writes directly.
type childDecl struct {
	name   string
	label  ast.Label
	fields []*ast.Field
}

// childDecls finds the children of top-level children fields, also under
// top-level and nested comprehensions (if, for).
func childDecls(decls []ast.Decl) []childDecl {
	var out []childDecl
	for _, f := range directFields(decls) {
		if name, _, err := ast.LabelName(f.Label); err != nil || name != "children" {
			continue
		}
		for _, c := range fieldsOf(f.Value) {
			name, _, err := ast.LabelName(c.Label)
			if err != nil {
				b, _ := format.Node(c.Label)
				name = string(b)
			}
			out = append(out, childDecl{name: name, label: c.Label, fields: fieldsOf(c.Value)})
		}
	}
	return out
}

// directFields are the fields of a list of declarations, with those of
// comprehensions and embedded structs.
func directFields(decls []ast.Decl) []*ast.Field {
	var out []*ast.Field
	for _, d := range decls {
		switch d := d.(type) {
		case *ast.Field:
			out = append(out, d)
		case *ast.Comprehension:
			out = append(out, fieldsOf(d.Value)...)
		case *ast.EmbedDecl:
			out = append(out, fieldsOf(d.Expr)...)
		}
	}
	return out
}

// fieldsOf are the fields an expression writes directly: a struct's, both
// sides of a unification, a comprehension's.
func fieldsOf(e ast.Node) []*ast.Field {
	switch e := e.(type) {
	case *ast.StructLit:
		return directFields(e.Elts)
	case *ast.BinaryExpr:
		if e.Op == token.AND {
			return append(fieldsOf(e.X), fieldsOf(e.Y)...)
		}
	case *ast.ParenExpr:
		return fieldsOf(e.X)
	case *ast.Comprehension:
		return fieldsOf(e.Value)
	}
	return nil
}

// warnings are one child's warnings.
func warnings(t *templates.Template, c childDecl) []Warning {
	var out []Warning
	var computed []*ast.Field // apiVersion or kind
	for _, f := range c.fields {
		name, _, err := ast.LabelName(f.Label)
		switch {
		case err != nil:
		case name == "apiVersion" || name == "kind":
			if !isStringLit(f.Value) {
				computed = append(computed, f)
			}
		case name == "metadata":
			for _, m := range fieldsOf(f.Value) {
				if n, _, err := ast.LabelName(m.Label); err == nil && n == "namespace" && !t.Policy.CrossNamespace.All && readsSpec(m.Value) {
					out = append(out, Warning{Pos: position(m.Value.Pos()), Child: c.name, Msg: fmt.Sprintf(
						"namespace is computed from the spec (%s): the policy allows the child only in the parent's namespace%s, and the engine refuses it (Synced=False, reason ChildRefused) when the spec names another; list the namespaces the spec may name in policy: crossNamespace",
						exprText(m.Value), allowedText(t.Policy.CrossNamespace))})
				}
			}
		}
	}
	if len(computed) == 0 || grantsChild(t, c) {
		return out
	}
	f := computed[0]
	var exprs []string
	for _, f := range computed {
		name, _, _ := ast.LabelName(f.Label)
		exprs = append(exprs, name+": "+exprText(f.Value))
	}
	w := Warning{Pos: position(f.Value.Pos()), Child: c.name, Msg: fmt.Sprintf(
		"the kind is computed (%s), so engine rbac generates no rule for it and the apiserver refuses the engine's writes of it; write apiVersion and kind as strings, one child per kind the spec may choose (each under an if), so that engine rbac grants each",
		strings.Join(exprs, ", "))}
	return append([]Warning{w}, out...)
}

// grantsChild reports whether the child, evaluated without a parent, has
// a concrete kind that RBAC grants (a constant of the template).
func grantsChild(t *templates.Template, c childDecl) bool {
	if _, ok := c.label.(*ast.Ident); !ok {
		if _, ok := c.label.(*ast.BasicLit); !ok {
			return false // a name computed by a comprehension
		}
	}
	gvk, ok := t.ChildKind(c.name)
	return ok && slices.Contains(t.ChildKinds(), gvk)
}

// isStringLit reports whether an expression is a plain string literal.
func isStringLit(e ast.Expr) bool {
	lit, ok := e.(*ast.BasicLit)
	return ok && lit.Kind == token.STRING
}

// readsSpec reports whether an expression refers to the parent's spec.
func readsSpec(e ast.Expr) bool {
	found := false
	ast.Walk(e, func(n ast.Node) bool {
		if s, ok := n.(*ast.SelectorExpr); ok {
			if x, ok := s.X.(*ast.Ident); ok && x.Name == "parent" {
				if name, _, err := ast.LabelName(s.Sel); err == nil && name == "spec" {
					found = true
				}
			}
		}
		return !found
	}, nil)
	return found
}

// position formats a position of a file parsed under its path relative to
// the templates directory as file:line:col.
func position(pos token.Pos) string {
	if !pos.IsValid() || pos.Filename() == "" {
		return ""
	}
	return fmt.Sprintf("%s:%d:%d", pos.Filename(), pos.Line(), pos.Column())
}

// exprText is an expression as the source writes it, on one line (as
// templates writes it in its errors).
func exprText(e ast.Expr) string {
	b, err := format.Node(e)
	if err != nil {
		return "an expression"
	}
	return strings.Join(strings.Fields(string(b)), " ")
}

// allowedText names what a policy allows besides the parent's namespace.
func allowedText(n policy.Namespaces) string {
	if len(n.Names) == 0 {
		return ""
	}
	return " or in " + strings.Join(n.Names, ", ")
}

// clusterRoleAndBinding are a ClusterRole of rules and its binding to
// subject, both named name.
func clusterRoleAndBinding(name string, labels map[string]string, rules []rbacv1.PolicyRule, subject rbacv1.Subject) (*rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding) {
	return &rbacv1.ClusterRole{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Rules:      rules,
		}, &rbacv1.ClusterRoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
			Subjects:   []rbacv1.Subject{subject},
		}
}
