package rbac

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/cuengine/engine/templates"
)

// The rules of Generate, one function per kind of rule: the ClusterRole's
// (parents, children, references, the engine's own, CRDs) and the Roles'
// (namespaceRoles).

// setKinds are the resources a set's templates name, by API group, and
// their CRDs.
type setKinds struct {
	// parents are the templates' own kinds with their status and
	// finalizers subresources, children the kinds they can produce (as
	// far as ChildKinds sees), referenced those they read (as far as
	// ReferenceKinds sees).
	parents, children, referenced map[string][]string
	// crds are the names of the templates' CRDs, converting those of the
	// kinds with several versions.
	crds, converting []string
}

// kindsOf collects the kinds of the set's templates.
func kindsOf(set *templates.Set) setKinds {
	k := setKinds{parents: map[string][]string{}, children: map[string][]string{}, referenced: map[string][]string{}}
	for _, t := range set.Templates() {
		plural := t.CRD().Spec.Names.Plural
		k.parents[t.GVK.Group] = append(k.parents[t.GVK.Group], plural, plural+"/status", plural+"/finalizers")
		k.crds = append(k.crds, t.CRD().Name)
		if t.Converts() {
			k.converting = append(k.converting, t.CRD().Name)
		}
		for _, gvk := range t.ChildKinds() {
			k.children[gvk.Group] = append(k.children[gvk.Group], resourceOf(gvk))
		}
		for _, gvk := range t.ReferenceKinds() {
			k.referenced[gvk.Group] = append(k.referenced[gvk.Group], resourceOf(gvk))
		}
	}
	return k
}

// namespacedReferences are the rules of the referenced Secrets and
// ConfigMaps that no template produces, by namespace: such a kind is read
// only in the namespaces the references reach, when each is known, and
// is then removed from referenced. The notes say why Secrets are granted
// cluster-wide when they are.
func namespacedReferences(set *templates.Set, children, referenced map[string][]string) (map[string][]rbacv1.PolicyRule, []string) {
	inNamespaces := map[string][]rbacv1.PolicyRule{}
	var notes []string
	for _, gvk := range namespacedReferenceKinds {
		res := resourceOf(gvk)
		if !slices.Contains(referenced[gvk.Group], res) || slices.Contains(children[gvk.Group], res) {
			continue
		}
		namespaces, why := referenceNamespaces(set, gvk)
		if len(why) > 0 {
			if gvk.Kind == "Secret" {
				notes = append(notes, fmt.Sprintf("Secrets are granted get, list and watch in every namespace: %s; give such a reference a literal metadata.namespace (or, for a cluster-scoped parent, list its namespaces in policy: crossNamespace) to grant only those namespaces", strings.Join(why, "; ")))
			}
			continue
		}
		referenced[gvk.Group] = slices.DeleteFunc(referenced[gvk.Group], func(r string) bool { return r == res })
		for _, ns := range namespaces {
			inNamespaces[ns] = append(inNamespaces[ns], rbacv1.PolicyRule{APIGroups: []string{gvk.Group}, Resources: []string{res}, Verbs: []string{"get", "list", "watch"}})
		}
	}
	return inNamespaces, notes
}

// parentRules grant the parent kinds, group by group: read, and update
// for the finalizer and the resource records; their status; their
// finalizers.
func parentRules(parents map[string][]string) []rbacv1.PolicyRule {
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
	return rules
}

// childRules grant every verb on the child kinds, group by group.
func childRules(children map[string][]string) []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	for _, group := range slices.Sorted(maps.Keys(children)) {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{group}, Resources: slices.Compact(slices.Sorted(slices.Values(children[group]))),
			Verbs: allVerbs})
	}
	return rules
}

// referenceRules grant reading the referenced kinds, group by group; a
// kind that is also a child kind has its rule in childRules.
func referenceRules(referenced, children map[string][]string) []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	for _, group := range slices.Sorted(maps.Keys(referenced)) {
		res := slices.DeleteFunc(slices.Compact(slices.Sorted(slices.Values(referenced[group]))), func(r string) bool {
			return slices.Contains(children[group], r)
		})
		if len(res) > 0 {
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{group}, Resources: res, Verbs: []string{"get", "list", "watch"}})
		}
	}
	return rules
}

// engineRules grant what the engine does whatever its templates: write
// events, and check who may read /metrics.
func engineRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		// Who may read /metrics (engine run --metrics-secure): the
		// apiserver authenticates the scraper's token and authorizes it.
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	}
}

// crdRules grant the CustomResourceDefinitions: read; with installCRDs,
// create, and update only of crds; else update of the converting kinds'
// CRDs; and update of the converting kinds' CRDs' status.
func crdRules(crds, converting []string, installCRDs bool) []rbacv1.PolicyRule {
	// The engine watches the CRDs' metadata, to retry the parents refused
	// for a kind the cluster did not serve once its CRD is installed.
	crdRead := []string{"get", "list", "watch"}
	if installCRDs {
		crdRead = append(crdRead, "create")
	}
	rules := []rbacv1.PolicyRule{{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: crdRead}}
	if installCRDs {
		// RBAC cannot name the object of a create, a list or a watch (the
		// cache reads CRDs through an informer); updates and patches (a
		// server-side apply) are limited to the templates' own CRDs.
		rules = append(rules,
			rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"update", "patch"},
				ResourceNames: slices.Compact(slices.Sorted(slices.Values(crds)))},
		)
	} else if len(converting) > 0 {
		// The certificate rotator keeps the caBundle of the conversion
		// webhook of the kinds with several versions.
		rules = append(rules,
			rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"update", "patch"},
				ResourceNames: slices.Sorted(slices.Values(converting))},
		)
	}
	if len(converting) > 0 {
		// The storage migration trims the status.storedVersions of the
		// CRDs of the kinds with several versions.
		rules = append(rules,
			rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions/status"}, Verbs: []string{"update"},
				ResourceNames: slices.Sorted(slices.Values(converting))},
		)
	}
	return rules
}

// namespaceRoles are the rules of the Roles, one per namespace: the
// leases in Namespace, the ControllerRevisions in RevisionNamespace
// (the same Role when it is Namespace), then the rules of inNamespaces,
// their namespaces sorted, each added to that namespace's Role if it has
// one already.
func namespaceRoles(opts Options, inNamespaces map[string][]rbacv1.PolicyRule) []namespaceRules {
	// The leader election Lease and the shards' Leases.
	leases := rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: readWrite}
	// The templates' revisions and their rollouts (package revisions).
	revisions := rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"controllerrevisions"}, Verbs: allVerbs}
	byNamespace := []namespaceRules{{opts.Namespace, []rbacv1.PolicyRule{leases, revisions}}}
	if rns := cmp.Or(opts.RevisionNamespace, opts.Namespace); rns != opts.Namespace {
		byNamespace = []namespaceRules{{opts.Namespace, []rbacv1.PolicyRule{leases}}, {rns, []rbacv1.PolicyRule{revisions}}}
	}
	for _, ns := range slices.Sorted(maps.Keys(inNamespaces)) {
		i := slices.IndexFunc(byNamespace, func(n namespaceRules) bool { return n.ns == ns })
		if i < 0 {
			i = len(byNamespace)
			byNamespace = append(byNamespace, namespaceRules{ns: ns})
		}
		byNamespace[i].rules = append(byNamespace[i].rules, inNamespaces[ns]...)
	}
	return byNamespace
}
