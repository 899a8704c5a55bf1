package templates

import (
	"fmt"
	"sort"
	"strings"

	"cuelang.org/go/cue"
	"k8s.io/apimachinery/pkg/util/validation"
)

// fieldCluster is the field of a child that names the registered workload
// cluster it is put in (package clusters), and the policy field listing
// the clusters a template may name. The engine takes it out of the child
// before applying it; without it the child goes to the engine's own
// cluster.
const fieldCluster = "cluster"

// fieldClusters is the policy field that lists the workload clusters a
// template's children may be put in.
const fieldClusters = "clusters"

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
				return Namespaces{}, &fieldError{"policy", fieldClusters, fmt.Sprintf("list items must be cluster names (DNS labels), not %q", fmt.Sprint(item))}
			}
			out.Names = append(out.Names, name)
		}
	default:
		return Namespaces{}, &fieldError{"policy", fieldClusters, fmt.Sprintf("must be true, false or a list of cluster names, not %q", fmt.Sprint(cl))}
	}
	return out, nil
}

// takeCluster removes the child's cluster field and returns it (checked
// by checkCluster first).
func takeCluster(obj map[string]any) string {
	name, _ := obj[fieldCluster].(string)
	delete(obj, fieldCluster)
	return name
}

// checkCluster checks a child's exported cluster field: absent, or the
// name of a cluster (a DNS label). Whether the policy allows it is for
// the render to say per parent, and for checkClusterTargets at load when
// it is literal.
func (t *Template) checkCluster(cv cue.Value, path string, raw any) error {
	if raw == nil {
		return nil
	}
	name, ok := raw.(string)
	msg := ""
	switch {
	case !ok:
		msg = fmt.Sprintf("must be the name of a registered cluster, not %v", raw)
	case name == "":
		msg = `must be the name of a registered cluster; leave the field out for the engine's own cluster`
	case len(validation.IsDNS1123Label(name)) > 0:
		msg = fmt.Sprintf("%q is not a cluster name (a DNS label: lower case letters, digits and '-', at most 63)", name)
	}
	if msg == "" {
		return nil
	}
	v := cv.LookupPath(cue.MakePath(cue.Str(fieldCluster)))
	return &Error{Template: t.Path, Problems: []Problem{{Pos: userPos(t.root, v), Path: path + "." + fieldCluster, Msg: msg}}}
}

// ClusterRefusal is the refusal of a child put in a cluster the policy
// does not allow; "" when it allows it. The render says it per parent,
// checkClusterTargets at load for a literal cluster.
func (p Policy) ClusterRefusal(kind, name, cluster string) string {
	switch {
	case cluster == "" || p.Clusters.Allows(cluster):
		return ""
	case !p.Clusters.Any():
		return fmt.Sprintf("%s %q is put in cluster %q; list it in policy: clusters in the template to allow it", kind, name, cluster)
	}
	return fmt.Sprintf("%s %q is put in cluster %q, which the template's policy.clusters does not list (%s)", kind, name, cluster, strings.Join(p.Clusters.Names, ", "))
}

// checkClusterTargets refuses, at the child's line, a cluster the
// template names literally and its policy does not allow. A cluster
// computed from the spec is checked per parent as it renders.
func (t *Template) checkClusterTargets() *Error {
	it, err := t.evaluated.LookupPath(pathChildren).Fields()
	if err != nil {
		return nil // not known before a parent exists
	}
	out := &Error{Template: t.Path}
	for it.Next() {
		v := it.Value().LookupPath(cue.MakePath(cue.Str(fieldCluster)))
		cluster, err := v.String()
		if err != nil {
			continue
		}
		kind, _ := it.Value().LookupPath(cue.ParsePath("kind")).String()
		name, _ := it.Value().LookupPath(cue.ParsePath("metadata.name")).String()
		if kind == "" {
			kind = "child"
		}
		if msg := t.Policy.ClusterRefusal(kind, name, cluster); msg != "" {
			out.Problems = append(out.Problems, Problem{Pos: userPos(t.root, v), Path: "children." + it.Selector().String() + "." + fieldCluster, Msg: msg})
		}
	}
	if len(out.Problems) == 0 {
		return nil
	}
	sort.SliceStable(out.Problems, func(i, j int) bool { return out.Problems[i].Pos < out.Problems[j].Pos })
	return out
}

// ChildClusters says, for `engine graph`, where each child the template
// declares with a cluster field goes: the cluster it names literally, or
// "" when it computes one per parent. A child without one goes to the
// engine's own cluster and is not listed.
func (t *Template) ChildClusters() map[string]string {
	out := map[string]string{}
	it, err := t.evaluated.LookupPath(pathChildren).Fields()
	if err != nil {
		return out
	}
	for it.Next() {
		v := it.Value().LookupPath(cue.MakePath(cue.Str(fieldCluster)))
		if !v.Exists() {
			continue
		}
		if name, err := v.String(); err == nil {
			out[it.Selector().Unquoted()] = name
		} else {
			out[it.Selector().Unquoted()] = ""
		}
	}
	return out
}
