package graph

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/token"
)

// presenceScan collects what a node's clauses read.
type presenceScan struct {
	observed map[string]bool // observed.<name>
	inputs   map[string]bool // see Presence.Inputs
}

// refScan finds what one node's expressions read.
type refScan struct {
	*graphScan
	self  nodeID
	seen  map[ast.Node]bool
	found map[string]Dependency // by name and via
	// presence, when set, also collects what is read of observed and the
	// parent (graphScan.presence).
	presence *presenceScan
}

// walkValue scans a declaration's value; of a child, not its readyWhen,
// which only says when the child is ready.
func (r *refScan) walkValue(v ast.Expr) {
	st, ok := v.(*ast.StructLit)
	if !ok || r.self.kind != ChildNode {
		r.walk(v)
		return
	}
	for _, e := range st.Elts {
		if f, ok := e.(*ast.Field); ok {
			if name, _ := labelName(f.Label); name == FieldReadyWhen {
				continue
			}
		}
		r.walk(e)
	}
}

func (r *refScan) add(name string, via Via, pos token.Pos) {
	if name == r.self.name || !r.exists(name) {
		// Itself (a Deployment reading its own status), or a name the
		// source does not declare literally: nothing to order.
		return
	}
	key := name + "\x00" + string(via)
	if _, ok := r.found[key]; !ok {
		r.found[key] = Dependency{Name: name, Via: via, Pos: r.pos(pos)}
	}
}

// walk scans an expression, following the identifiers it uses to their
// declarations (hidden fields, lets, other files' top-level fields).
func (r *refScan) walk(n ast.Node) {
	if n == nil || r.seen[n] || r.containers[n] {
		return
	}
	r.seen[n] = true
	ast.Walk(n, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.Field:
			// A label is not a reference, unless it is computed.
			switch x.Label.(type) {
			case *ast.Ident, *ast.BasicLit:
			default:
				r.walk(x.Label)
			}
			if x.Value != nil {
				r.walk(x.Value)
			}
			return false
		case *ast.SelectorExpr:
			if r.parentRead(x) {
				return false
			}
			if !r.edge(x) {
				r.walk(x.X) // not x.Sel: a selector's label is no reference
			}
			return false
		case *ast.IndexExpr:
			return !r.edge(x)
		case *ast.Ident:
			r.follow(x)
		}
		return true
	}, nil)
}

// edge adds the dependency an expression states, if it is one.
func (r *refScan) edge(e ast.Expr) bool {
	head, name, ok := r.special(e)
	if !ok {
		return false
	}
	via := ViaReference
	if head == "observed" {
		via = ViaObserved
		if r.presence != nil {
			r.presence.observed[name] = true
		}
	}
	r.add(name, via, e.Pos())
	return true
}

// special recognises observed.<name>, children.<name> and resources.<name>
// (or observed["<name>"]) at the head of a selector chain, when the head is
// the template's top-level field and not something local of that name.
func (r *refScan) special(e ast.Expr) (head, name string, ok bool) {
	var chain []ast.Expr
	for {
		chain = append(chain, e)
		switch x := e.(type) {
		case *ast.SelectorExpr:
			e = x.X
			continue
		case *ast.IndexExpr:
			e = x.X
			continue
		}
		break
	}
	id, isIdent := e.(*ast.Ident)
	if !isIdent || len(chain) < 2 {
		return "", "", false
	}
	switch id.Name {
	case "observed", string(ChildNode), string(ResourceNode), string(ReferenceNode):
	default:
		return "", "", false
	}
	if id.Node != nil && r.topValue[id.Node] != id.Name && r.sections[id.Node] != id.Name {
		return "", "", false // a local of that name
	}
	switch x := chain[len(chain)-2].(type) { // the element right after the head
	case *ast.SelectorExpr:
		name, _ = labelName(x.Sel)
	case *ast.IndexExpr:
		name, _ = literalString(x.Index)
	}
	return id.Name, name, name != ""
}

// parentRead records, while scanning a node's clauses, what a selector
// chain on the template's parent reads: the spec changes only with the
// generation, the metadata's name, namespace, uid, generation and
// creationTimestamp never; anything else is an input of Presence.
func (r *refScan) parentRead(e *ast.SelectorExpr) bool {
	if r.presence == nil {
		return false
	}
	var labels []string
	var x ast.Expr = e
	for {
		sel, ok := x.(*ast.SelectorExpr)
		if !ok {
			break
		}
		name, _ := labelName(sel.Sel)
		labels = append([]string{name}, labels...)
		x = sel.X
	}
	id, ok := x.(*ast.Ident)
	if !ok || id.Name != "parent" || (id.Node != nil && r.topValue[id.Node] != "parent") {
		return false
	}
	switch {
	case labels[0] == "spec", labels[0] == "apiVersion", labels[0] == "kind":
	case labels[0] == "metadata" && len(labels) > 1 && slices.Contains([]string{"name", "namespace", "uid", "generation", "creationTimestamp"}, labels[1]):
	case labels[0] == "metadata":
		r.presence.inputs["parent.metadata"] = true
	case labels[0] == "status":
		r.presence.inputs["parent.status"] = true
	default:
		r.presence.inputs["parent"] = true
	}
	return true
}

// follow scans what an identifier refers to, when that is outside the
// expression being scanned: a sibling node is an edge; a top-level field
// or let is followed across every file of the package.
func (r *refScan) follow(id *ast.Ident) {
	if dep, ok := r.byValue[id.Node]; ok {
		r.add(dep.name, ViaReference, id.Pos())
		return
	}
	name, top := r.topValue[id.Node]
	if id.Node == nil {
		name, top = id.Name, len(r.top[id.Name]) > 0
	}
	if top {
		switch name {
		case "parent":
			if r.presence != nil {
				r.presence.inputs["parent"] = true // a use not followed
			}
			return
		case "observed", string(ChildNode), string(ResourceNode), string(ReferenceNode):
			return // filled by the engine, or only read through a selector
		}
		for _, v := range r.top[name] {
			r.walk(v)
		}
		return
	}
	switch x := id.Node.(type) {
	case *ast.Ident:
		// A comprehension's variable: its source is a guard of the node,
		// or part of the expression being scanned.
	case *ast.LetClause:
		r.walk(x.Expr)
	case ast.Expr:
		r.walk(x)
	}
}

// cycles reports every dependency cycle once, with the position of each
// edge in it.
func (g *Graph) cycles() []Problem {
	byName := map[string][]int{}
	for i, n := range g.Nodes {
		byName[n.Name] = append(byName[n.Name], i)
	}
	const (
		unvisited = iota
		active
		done
	)
	state := make([]int, len(g.Nodes))
	var stack []int      // nodes on the current path
	var via []Dependency // via[i]: the edge from stack[i] to stack[i+1]
	var problems []Problem
	var visit func(i int)
	visit = func(i int) {
		state[i] = active
		stack = append(stack, i)
		for _, d := range g.Nodes[i].DependsOn {
			for _, j := range byName[d.Name] {
				switch state[j] {
				case active:
					start := slices.Index(stack, j)
					problems = append(problems, g.cycleProblem(stack[start:], append(slices.Clone(via[start:]), d)))
				case unvisited:
					via = append(via, d)
					visit(j)
					via = via[:len(via)-1]
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[i] = done
	}
	for i := range g.Nodes {
		if state[i] == unvisited {
			visit(i)
		}
	}
	return problems
}

// cycleProblem says "children.a reads observed.b (a.cue:3:4), and
// resources.b reads observed.a (a.cue:9:2)", at the first edge.
func (g *Graph) cycleProblem(nodes []int, edges []Dependency) Problem {
	var parts []string
	for k, i := range nodes {
		n := g.Nodes[i]
		parts = append(parts, fmt.Sprintf("%s.%s %s (%s)", n.Kind, n.Name, edges[k].describe(), edges[k].Pos))
	}
	first := g.Nodes[nodes[0]]
	return Problem{Pos: edges[0].Pos, Path: string(first.Kind) + "." + first.Name,
		Msg: "dependency cycle: " + strings.Join(parts, ", and ") + "; one of them must go"}
}

// describe says how the edge is stated, as the source says it.
func (d Dependency) describe() string {
	switch d.Via {
	case ViaObserved:
		return "reads observed." + d.Name
	case ViaDependsOn:
		return "lists " + strconv.Quote(d.Name) + " in dependsOn"
	}
	return "reads fields of " + d.Name
}

// labelName returns a label's name when the source states it literally.
func labelName(l ast.Label) (string, bool) {
	name, _, err := ast.LabelName(l)
	return name, err == nil && name != ""
}

// LiteralField is the string a struct literal states for the field name
// (kind: "Deployment"), "" when it states none literally.
func LiteralField(s *ast.StructLit, name string) string {
	for _, e := range s.Elts {
		f, ok := e.(*ast.Field)
		if !ok {
			continue
		}
		label, _, err := ast.LabelName(f.Label)
		if err != nil || label != name {
			continue
		}
		if lit, ok := f.Value.(*ast.BasicLit); ok {
			if v, err := strconv.Unquote(lit.Value); err == nil {
				return v
			}
		}
	}
	return ""
}

func literalString(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

type namePos struct {
	name string
	pos  token.Pos
}

// literalNames reads a list of string literals.
func literalNames(e ast.Expr) ([]namePos, bool) {
	list, ok := e.(*ast.ListLit)
	if !ok {
		return nil, false
	}
	var out []namePos
	for _, el := range list.Elts {
		s, ok := literalString(el)
		if !ok || s == "" {
			return nil, false
		}
		out = append(out, namePos{s, el.Pos()})
	}
	return out, true
}
