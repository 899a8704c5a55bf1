package graph

import (
	"fmt"
	"slices"
	"strings"

	"cuelang.org/go/cue/token"
)

// clashes reports every local name declared in two sections: a name is a
// child, a resource or a reference, never two, since observed.<name> is
// one thing. The problem is at the later declaration and names the other.
func (s *graphScan) clashes() []Problem {
	var problems []Problem
	kinds := []NodeKind{ChildNode, ResourceNode, ReferenceNode}
	for _, id := range s.sortedIDs() {
		for _, other := range kinds[slices.Index(kinds, id.kind)+1:] {
			od := s.decls[nodeID{other, id.name}]
			if od == nil {
				continue
			}
			first, second := nodeID{other, id.name}, id
			if before(s.decls[id].pos, od.pos) {
				first, second = second, first
			}
			problems = append(problems, Problem{Pos: s.pos(s.decls[second].pos), Path: second.String(),
				Msg: fmt.Sprintf("local name %q is also %s (%s): a local name is a child, a resource or a reference, never two",
					id.name, first, s.pos(s.decls[first].pos))})
		}
	}
	return problems
}

// before reports whether a comes before b: by file, then offset.
func before(a, b token.Pos) bool {
	if a.Filename() != b.Filename() {
		return a.Filename() < b.Filename()
	}
	return a.Offset() < b.Offset()
}

// referenceInputs reports references that read observed state or other
// children, resources or references: a reference is read from the parent
// alone, before anything else is read or written.
func (g *Graph) referenceInputs() []Problem {
	var problems []Problem
	for _, n := range g.Nodes {
		if n.Kind != ReferenceNode {
			continue
		}
		for _, d := range n.DependsOn {
			problems = append(problems, Problem{Pos: d.Pos, Path: string(n.Kind) + "." + n.Name,
				Msg: fmt.Sprintf("a reference is read from the parent alone, before anything else: it cannot depend on %s (it %s)", d.Name, d.describe())})
		}
	}
	slices.SortFunc(problems, func(a, b Problem) int { return strings.Compare(a.Pos, b.Pos) })
	return problems
}
