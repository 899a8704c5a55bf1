package templates

import (
	"sort"

	"cuelang.org/go/cue"

	"github.com/cuengine/engine/templates/policy"
)

// fieldCluster is the field of a child that names the registered workload
// cluster it is put in (package clusters). The engine takes it out of the child
// before applying it; without it the child goes to the engine's own
// cluster.
const fieldCluster = "cluster"

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
	msg := policy.ClusterNameProblem(raw)
	if msg == "" {
		return nil
	}
	v := cv.LookupPath(cue.MakePath(cue.Str(fieldCluster)))
	return &Error{Template: t.Path, Problems: []Problem{{Pos: userPos(t.root, v), Path: path + "." + fieldCluster, Msg: msg}}}
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
