package policy

import (
	"fmt"
	"slices"
	"strings"

	"cuelang.org/go/cue"
	"k8s.io/apimachinery/pkg/util/validation"
)

// noNamespaceOfItsOwn ends the refusal of a namespace a cluster-scoped
// parent's policy does not allow at all.
const noNamespaceOfItsOwn = "a cluster-scoped parent has no namespace of its own: list the namespace in policy: crossNamespace in the template to allow it"

// fieldClusters is the policy field that lists the workload clusters a
// template's children may be put in.
const fieldClusters = "clusters"

// Policy holds the template's explicit permissions, from its top-level
// policy block. By default children live in the parent's namespace.
type Policy struct {
	// CrossNamespace allows children in namespaces other than the parent's.
	CrossNamespace Namespaces
	// ClusterScoped allows cluster-scoped children.
	ClusterScoped bool
	// Clusters are the registered workload clusters children may be put
	// in (a child's cluster field); none by default.
	Clusters Namespaces
}

// Namespaces is a set of namespaces: all of them (crossNamespace: true), or
// the ones listed (crossNamespace: ["shared", "monitoring"]).
type Namespaces struct {
	All   bool
	Names []string
}

// Allows reports whether ns is in the set.
func (n Namespaces) Allows(ns string) bool { return n.All || slices.Contains(n.Names, ns) }

// Any reports whether the set holds any namespace at all.
func (n Namespaces) Any() bool { return n.All || len(n.Names) > 0 }

// within is the namespaces in both n and bound.
func (n Namespaces) within(bound Namespaces) Namespaces {
	switch {
	case bound.All:
		return n
	case n.All:
		return Namespaces{Names: slices.Clone(bound.Names)}
	}
	out := Namespaces{}
	for _, name := range n.Names {
		if slices.Contains(bound.Names, name) {
			out.Names = append(out.Names, name)
		}
	}
	return out
}

// Within is what p allows that bound allows too: the rights of a revision
// a parent runs (pinned, or not moved yet), bounded by the newest
// template's policy, so that an older revision never writes where the
// platform has since narrowed the template.
func (p Policy) Within(bound Policy) Policy {
	return Policy{CrossNamespace: p.CrossNamespace.within(bound.CrossNamespace), ClusterScoped: p.ClusterScoped && bound.ClusterScoped,
		Clusters: p.Clusters.within(bound.Clusters)}
}

// DecodePolicy reads the policy block: crossNamespace is a bool or a list
// of namespace names.
func DecodePolicy(v cue.Value) (Policy, error) {
	if err := KnownFields("policy", v, []string{"crossNamespace", "clusterScoped", fieldClusters}); err != nil {
		return Policy{}, err
	}
	var raw struct {
		CrossNamespace any  `json:"crossNamespace"`
		ClusterScoped  bool `json:"clusterScoped"`
		Clusters       any  `json:"clusters"`
	}
	if err := v.Decode(&raw); err != nil {
		return Policy{}, err
	}
	p := Policy{ClusterScoped: raw.ClusterScoped}
	var err error
	if p.Clusters, err = decodeClusters(raw.Clusters); err != nil {
		return Policy{}, err
	}
	switch cn := raw.CrossNamespace.(type) {
	case nil:
	case bool:
		p.CrossNamespace.All = cn
	case []any:
		for _, item := range cn {
			name, ok := item.(string)
			if !ok || name == "" {
				return Policy{}, &FieldError{"policy", "crossNamespace", fmt.Sprintf("list items must be namespace names, not %q", fmt.Sprint(item))}
			}
			p.CrossNamespace.Names = append(p.CrossNamespace.Names, name)
		}
	default:
		return Policy{}, &FieldError{"policy", "crossNamespace", fmt.Sprintf("must be true, false or a list of namespace names, not %q", fmt.Sprint(cn))}
	}
	return p, nil
}

// FieldError is a field of a top-level block (policy, rollout, a
// version) with a value of the wrong shape. The templates package puts it
// at the field's line: Field is the path of the field in Block.
type FieldError struct{ Block, Field, Msg string }

func (e *FieldError) Error() string { return e.Block + "." + e.Field + ": " + e.Msg }

// decodeClusters reads policy.clusters: true (any registered cluster) or a
// list of cluster names; absent, no cluster but the engine's own.
func decodeClusters(raw any) (Namespaces, error) {
	var out Namespaces
	switch cl := raw.(type) {
	case nil:
	case bool:
		out.All = cl
	case []any:
		for _, item := range cl {
			name, ok := item.(string)
			if !ok || len(validation.IsDNS1123Label(name)) > 0 {
				return Namespaces{}, &FieldError{"policy", fieldClusters, fmt.Sprintf("list items must be cluster names (DNS labels), not %q", fmt.Sprint(item))}
			}
			out.Names = append(out.Names, name)
		}
	default:
		return Namespaces{}, &FieldError{"policy", fieldClusters, fmt.Sprintf("must be true, false or a list of cluster names, not %q", fmt.Sprint(cl))}
	}
	return out, nil
}

// ClusterRefusal is the refusal of a child put in a cluster the policy
// does not allow; "" when it allows it. The render says it per parent,
// the templates package at load for a literal cluster.
func (p Policy) ClusterRefusal(kind, name, cluster string) string {
	switch {
	case cluster == "" || p.Clusters.Allows(cluster):
		return ""
	case !p.Clusters.Any():
		return fmt.Sprintf("%s %q is put in cluster %q; list it in policy: clusters in the template to allow it", kind, name, cluster)
	}
	return fmt.Sprintf("%s %q is put in cluster %q, which the template's policy.clusters does not list (%s)", kind, name, cluster, strings.Join(p.Clusters.Names, ", "))
}

// NamespaceRefusal is the refusal of a target (a child or a reference) of
// kind in namespace ns that a cluster-scoped parent's policy does not
// allow; "" when it allows it.
func (p Policy) NamespaceRefusal(kind, ns string) string {
	switch {
	case !p.CrossNamespace.Any():
		return fmt.Sprintf("%s in namespace %q: %s", kind, ns, noNamespaceOfItsOwn)
	case !p.CrossNamespace.Allows(ns):
		return fmt.Sprintf("%s in namespace %q, which the template's policy.crossNamespace does not list (%s)", kind, ns, strings.Join(p.CrossNamespace.Names, ", "))
	}
	return ""
}

// ClusterNameProblem is what is wrong with a child's cluster field, raw
// as decoded (nil: absent), before the policy is asked: "" for a cluster
// name (a DNS label) or no field at all.
func ClusterNameProblem(raw any) string {
	if raw == nil {
		return ""
	}
	name, ok := raw.(string)
	switch {
	case !ok:
		return fmt.Sprintf("must be the name of a registered cluster, not %v", raw)
	case name == "":
		return `must be the name of a registered cluster; leave the field out for the engine's own cluster`
	case len(validation.IsDNS1123Label(name)) > 0:
		return fmt.Sprintf("%q is not a cluster name (a DNS label: lower case letters, digits and '-', at most 63)", name)
	}
	return ""
}
