package templates

import (
	"sort"

	"cuelang.org/go/cue"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// checkClusterPolicy checks, for a cluster-scoped parent, the targets its
// template states without a parent: a child or a reference in a literal
// namespace the policy does not allow, a child of a cluster-scoped kind
// without policy.clusterScoped. A kind whose scope is not known here (no
// built-in, no CRD given) is left to the engine, which checks every
// parent's children and references as it renders them.
func (cs *childSchemas) checkClusterPolicy(t *Template) *Error {
	if t.crd.Spec.Scope != apiextensionsv1.ClusterScoped {
		return nil
	}
	out := &Error{Template: t.Path}
	for _, block := range []string{"children", "references"} {
		m := t.evaluated.LookupPath(cue.ParsePath(block))
		it, err := m.Fields()
		if err != nil {
			continue // not known before a parent exists
		}
		for it.Next() {
			path := block + "." + it.Selector().String()
			if p := cs.checkTarget(t, path, block == "children", it.Value()); p != nil {
				out.Problems = append(out.Problems, *p)
			}
		}
	}
	if len(out.Problems) == 0 {
		return nil
	}
	sort.SliceStable(out.Problems, func(i, j int) bool { return out.Problems[i].Pos < out.Problems[j].Pos })
	return out
}

// checkTarget checks one child or reference of a cluster-scoped parent.
func (cs *childSchemas) checkTarget(t *Template, path string, child bool, v cue.Value) *Problem {
	kv := v.LookupPath(cue.ParsePath("kind"))
	apiVersion, err1 := v.LookupPath(cue.ParsePath("apiVersion")).String()
	kind, err2 := kv.String()
	if err1 != nil || err2 != nil {
		return nil
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil
	}
	namespaced, known := cs.kinds.Namespaced(gv.WithKind(kind))
	switch {
	case !known:
		return nil
	case !namespaced:
		if child && !t.Policy.ClusterScoped {
			return &Problem{Pos: userPos(t.root, kv), Path: path + ".kind",
				Msg: kind + " is cluster-scoped; set policy: clusterScoped: true in the template to allow it"}
		}
		// A cluster-scoped reference: the render refuses it per parent
		// alike for every parent scope.
		return nil
	}
	nsv := v.LookupPath(cue.ParsePath("metadata.namespace"))
	ns, err := nsv.String()
	if err != nil || ns == "" {
		return nil // from the parent, or missing: checked per parent
	}
	if msg := t.Policy.NamespaceRefusal(kind, ns); msg != "" {
		return &Problem{Pos: userPos(t.root, nsv), Path: path + ".metadata.namespace", Msg: msg}
	}
	return nil
}
