package graph

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"
)

// Graph says what each child and resource of a template depends on, as its
// source shows: a child that reads observed.bucket depends on the resource
// bucket; one that reads children.config.metadata.name depends on the child
// config; dependsOn: ["bucket"] says so explicitly, for what references
// cannot show. Creation already follows it (observed.bucket does not exist
// before the bucket does); deletion follows it backwards: a thing is deleted
// once everything that depends on it is gone. A cycle is a template error.
//
// The graph holds the children and resources whose local names the source
// states literally; one named by an interpolation (a comprehension's key)
// has no node, and nothing can depend on it.
type Graph struct {
	// Nodes are sorted by kind (children first), then name.
	Nodes []Node
}

// NodeKind is where a node is declared: "children", "resources" or
// "references".
type NodeKind string

// Kinds of nodes.
const (
	ChildNode    NodeKind = "children"
	ResourceNode NodeKind = "resources"
	// ReferenceNode is an object the template reads and does not own
	// (templates/references.go): an input, which depends on nothing.
	ReferenceNode NodeKind = "references"
)

// Node is one child or resource of the graph.
type Node struct {
	Kind NodeKind
	Name string
	// Type is the child's or reference's kind ("Deployment") or the
	// resource's provider ("gcs") when the source states it literally,
	// else "".
	Type string
	// Pos is the node's first declaration, "file:line:col".
	Pos string
	// DependsOn is sorted by name.
	DependsOn []Dependency
	// Presence is set when every declaration of the node sits under an
	// if, for or let clause: the node exists only while they hold, and
	// Presence says what they read.
	Presence *Presence
}

// Presence is what the clauses around a node's declarations read.
type Presence struct {
	// Observed are the template's children and resources whose observed
	// state the clauses read (the node itself included), sorted.
	Observed []string
	// Inputs are the other things they read that change without a new
	// spec or template: "parent.metadata" (labels, annotations),
	// "parent.status", "parent" (a use the scan cannot follow) and
	// "references.<name>"; sorted.
	Inputs []string
	// Pos is the first clause's position, "file:line:col".
	Pos string
}

// Transient reports whether the node's presence follows observed state
// alone, besides the spec and the template: a child kept while those
// clauses do not hold, until the spec or template changes
// (reconciler/prune.go), rather than pruned on an upstream's transient
// change.
func (p *Presence) Transient() bool {
	return p != nil && len(p.Observed) > 0 && len(p.Inputs) == 0
}

// Dependency is one edge: the node depends on the local name Name.
type Dependency struct {
	Name string
	// Via says how the source says so.
	Via Via
	// Pos is where, "file:line:col".
	Pos string
}

// Via is how a dependency is stated.
type Via string

// Ways of stating a dependency.
const (
	// ViaObserved: the node reads observed.<name>, so it waits for it to exist.
	ViaObserved Via = "observed"
	// ViaReference: the node reads a field the template declares for
	// another child or resource (children.<name>.metadata.name).
	ViaReference Via = "reference"
	// ViaDependsOn: the node lists the name in its dependsOn field.
	ViaDependsOn Via = "dependsOn"
)

// FieldDependsOn is the field of a child or resource that lists its
// explicit dependencies. The engine takes it out of the child before
// applying it.
const FieldDependsOn = "dependsOn"

// FieldReadyWhen is the field of a child that says when it is ready
// (templates/ready.go). The engine takes it out of the child before
// applying it; it is no dependency of the child, whatever it reads.
const FieldReadyWhen = "readyWhen"

// Names returns the sorted local names the node kind/name depends on.
func (g *Graph) Names(kind NodeKind, name string) []string {
	if g == nil {
		return nil
	}
	for _, n := range g.Nodes {
		if n.Kind != kind || n.Name != name {
			continue
		}
		var out []string
		for _, d := range n.DependsOn {
			// A reference is never created or deleted: nothing to order.
			if !slices.Contains(out, d.Name) && !g.isReference(d.Name) {
				out = append(out, d.Name)
			}
		}
		return out
	}
	return nil
}

// Warnings are what engine vet says about the graph without refusing it:
// each child whose presence reads observed state together with something
// else that changes without the spec (Presence), which the
// engine therefore prunes on a transient change of that observed state.
func (g *Graph) Warnings() []string {
	if g == nil {
		return nil
	}
	var out []string
	for _, n := range g.Nodes {
		p := n.Presence
		if n.Kind != ChildNode || p == nil || len(p.Observed) == 0 || len(p.Inputs) == 0 {
			continue
		}
		reads := make([]string, len(p.Observed))
		for i, o := range p.Observed {
			reads[i] = "observed." + o
		}
		var upstream []string
		for _, o := range p.Observed {
			if o != n.Name {
				upstream = append(upstream, strconv.Quote(o))
			}
		}
		fix := "declare it outside the if"
		if len(upstream) > 0 {
			fix += ", with dependsOn: [" + strings.Join(upstream, ", ") + "], and give what it waits for a readyWhen: it is then created once that is ready and never pruned because it stops being ready"
		}
		out = append(out, fmt.Sprintf("%s: children.%s: its condition reads %s and %s: a change of either removes it, so a transient change of %s (an upstream briefly not ready) prunes it; %s",
			p.Pos, n.Name, strings.Join(reads, ", "), strings.Join(p.Inputs, ", "), strings.Join(reads, ", "), fix))
	}
	return out
}

// isReference reports whether name is a reference of the graph.
func (g *Graph) isReference(name string) bool {
	return slices.ContainsFunc(g.Nodes, func(n Node) bool { return n.Kind == ReferenceNode && n.Name == name })
}

// Problem is one error of the graph a user can act on, as
// templates.Problem: where it is ("file:line:col"), the path of what it is
// about ("children.app.dependsOn"), and what is wrong.
type Problem struct {
	Pos  string
	Path string
	Msg  string
}

// Of builds the graph of one template from its files and checks it: an
// explicit dependency on a name the template does not declare, a local
// name declared twice, a reference that depends on anything, or a cycle
// is a problem at the positions involved, and there is no graph. pos
// formats a position in the user's files ("file:line:col" relative to the
// templates directory). The error is a file's that does not parse (the
// compiler reports it first).
func Of(files []string, pos func(token.Pos) string) (*Graph, []Problem, error) {
	s := &graphScan{pos: pos, top: map[string][]ast.Expr{}, topValue: map[ast.Node]string{},
		decls: map[nodeID]*decl{}, byValue: map[ast.Node]nodeID{}, containers: map[ast.Node]bool{}, sections: map[ast.Node]string{}}
	for _, f := range files {
		af, err := parser.ParseFile(f, nil)
		if err != nil {
			return nil, nil, err
		}
		s.scope(af.Decls)
		s.collect(af.Decls, nil, nil)
	}
	g := &Graph{}
	var problems []Problem
	for _, id := range s.sortedIDs() {
		n, errs := s.node(id)
		problems = append(problems, errs...)
		g.Nodes = append(g.Nodes, n)
	}
	problems = append(problems, s.clashes()...) // localnames.go
	problems = append(problems, g.referenceInputs()...)
	if len(problems) == 0 {
		problems = g.cycles()
	}
	if len(problems) > 0 {
		return nil, problems, nil
	}
	return g, nil, nil
}

// nodeID names a node: children.app, resources.bucket.
type nodeID struct {
	kind NodeKind
	name string
}

func (id nodeID) String() string { return string(id.kind) + "." + id.name }

// decl is everything the source says about one node, across its
// declarations.
type decl struct {
	pos    token.Pos
	values []ast.Expr
	// guards are the clauses of the comprehensions around a declaration
	// (if observed.bucket != _|_ { children: app: ... }): the node exists
	// only through them, so it depends on what they read.
	guards    []ast.Expr
	dependsOn []*ast.Field
	// always: a declaration sits under no clause.
	always bool
}

type graphScan struct {
	pos func(token.Pos) string
	// top holds the values of the top-level fields and lets of the package,
	// by name, over all its files; topValue maps each to its name, so an
	// identifier resolved to one declaration follows them all.
	top      map[string][]ast.Expr
	topValue map[ast.Node]string
	decls    map[nodeID]*decl
	// byValue maps a declaration's value to its node, so a reference to a
	// sibling (children: {a: ..., b: x: a.metadata.name}) is an edge.
	byValue map[ast.Node]nodeID
	// containers are the structs that hold declarations, never followed:
	// reading one would make a node depend on all its siblings.
	containers map[ast.Node]bool
	// sections are the values of children: and resources: fields, wherever
	// declared (a comprehension's children: is the template's too).
	sections map[ast.Node]string
}

// scope records the top-level fields and lets of a file.
func (s *graphScan) scope(decls []ast.Decl) {
	for _, d := range decls {
		switch x := d.(type) {
		case *ast.Field:
			if name, ok := labelName(x.Label); ok {
				s.top[name] = append(s.top[name], x.Value)
				s.topValue[x.Value] = name
			}
		case *ast.LetClause:
			s.top[x.Ident.Name] = append(s.top[x.Ident.Name], x.Expr)
			s.topValue[x] = x.Ident.Name
		}
	}
}

// collect finds the declarations of children and resources, at the top
// level and in comprehensions and embedded structs, at any depth of
// children: and resources:.
func (s *graphScan) collect(decls []ast.Decl, path []string, guards []ast.Expr) {
	for _, d := range decls {
		switch x := d.(type) {
		case *ast.Field:
			name, ok := labelName(x.Label)
			if !ok {
				continue
			}
			switch {
			case len(path) == 0 && (name == string(ChildNode) || name == string(ResourceNode) || name == string(ReferenceNode)):
				if st, ok := x.Value.(*ast.StructLit); ok {
					s.containers[st] = true
					s.sections[st] = name
					s.collect(st.Elts, []string{name}, guards)
				}
			case len(path) == 1:
				s.declare(nodeID{NodeKind(path[0]), name}, x, guards)
			}
		case *ast.Comprehension:
			g := slices.Clip(guards)
			for _, c := range x.Clauses {
				switch c := c.(type) {
				case *ast.IfClause:
					g = append(g, c.Condition)
				case *ast.ForClause:
					g = append(g, c.Source)
				case *ast.LetClause:
					g = append(g, c.Expr)
				}
			}
			if st, ok := x.Value.(*ast.StructLit); ok {
				s.containers[st] = true
				s.collect(st.Elts, path, g)
			}
		case *ast.EmbedDecl:
			if st, ok := x.Expr.(*ast.StructLit); ok {
				s.containers[st] = true
				s.collect(st.Elts, path, guards)
			}
		}
	}
}

func (s *graphScan) declare(id nodeID, f *ast.Field, guards []ast.Expr) {
	d := s.decls[id]
	if d == nil {
		d = &decl{pos: f.Label.Pos()}
		s.decls[id] = d
	}
	d.values = append(d.values, f.Value)
	d.guards = append(d.guards, guards...)
	d.always = d.always || len(guards) == 0
	s.byValue[f.Value] = id
	if st, ok := f.Value.(*ast.StructLit); ok {
		for _, e := range st.Elts {
			if df, ok := e.(*ast.Field); ok {
				if name, _ := labelName(df.Label); name == FieldDependsOn {
					d.dependsOn = append(d.dependsOn, df)
				}
			}
		}
	}
}

func (s *graphScan) sortedIDs() []nodeID {
	ids := make([]nodeID, 0, len(s.decls))
	for id := range s.decls {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b nodeID) int {
		if a.kind != b.kind {
			return strings.Compare(string(a.kind), string(b.kind))
		}
		return strings.Compare(a.name, b.name)
	})
	return ids
}

// exists reports whether a local name is a node of any kind.
func (s *graphScan) exists(name string) bool {
	return s.decls[nodeID{ChildNode, name}] != nil || s.decls[nodeID{ResourceNode, name}] != nil || s.decls[nodeID{ReferenceNode, name}] != nil
}

// node turns one declaration into a node: its references, then its
// explicit dependencies, checked.
func (s *graphScan) node(id nodeID) (Node, []Problem) {
	d := s.decls[id]
	n := Node{Kind: id.kind, Name: id.name, Pos: s.pos(d.pos)}
	field := "kind" // children and references
	if id.kind == ResourceNode {
		field = "provider"
	}
	for _, v := range d.values {
		if st, ok := v.(*ast.StructLit); ok && n.Type == "" {
			n.Type = LiteralField(st, field)
		}
	}
	r := &refScan{graphScan: s, self: id, seen: map[ast.Node]bool{}, found: map[string]Dependency{}}
	for _, e := range d.guards {
		r.walk(e)
	}
	for _, e := range d.values {
		r.walkValue(e)
	}
	if !d.always && len(d.guards) > 0 {
		n.Presence = s.presence(id, d.guards)
	}
	var problems []Problem
	for _, f := range d.dependsOn {
		names, ok := literalNames(f.Value)
		if !ok {
			problems = append(problems, Problem{Pos: s.pos(f.Value.Pos()), Path: id.String() + "." + FieldDependsOn,
				Msg: `must be a list of local names, such as ["bucket"]`})
			continue
		}
		for _, nm := range names {
			switch {
			case nm.name == id.name:
				problems = append(problems, Problem{Pos: s.pos(nm.pos), Path: id.String() + "." + FieldDependsOn,
					Msg: fmt.Sprintf("%s cannot depend on itself", id)})
			case !s.exists(nm.name):
				problems = append(problems, Problem{Pos: s.pos(nm.pos), Path: id.String() + "." + FieldDependsOn,
					Msg: fmt.Sprintf("the template declares no child or resource named %q", nm.name)})
			case s.decls[nodeID{ReferenceNode, nm.name}] != nil:
				problems = append(problems, Problem{Pos: s.pos(nm.pos), Path: id.String() + "." + FieldDependsOn,
					Msg: fmt.Sprintf("%q is a reference: it is never created, so there is nothing to wait for (read observed.%s instead)", nm.name, nm.name)})
			default:
				r.add(nm.name, ViaDependsOn, nm.pos)
			}
		}
	}
	for _, dep := range r.found {
		n.DependsOn = append(n.DependsOn, dep)
	}
	slices.SortFunc(n.DependsOn, func(a, b Dependency) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(string(a.Via), string(b.Via))
	})
	return n, problems
}

// presence scans the clauses around a node's declarations for what they
// read.
func (s *graphScan) presence(id nodeID, guards []ast.Expr) *Presence {
	p := &presenceScan{observed: map[string]bool{}, inputs: map[string]bool{}}
	r := &refScan{graphScan: s, self: id, seen: map[ast.Node]bool{}, found: map[string]Dependency{}, presence: p}
	for _, e := range guards {
		r.walk(e)
	}
	out := &Presence{Pos: s.pos(guards[0].Pos())}
	for name := range p.observed {
		switch {
		case s.decls[nodeID{ReferenceNode, name}] != nil:
			p.inputs["references."+name] = true
		case s.exists(name) || name == id.name:
			out.Observed = append(out.Observed, name)
		}
	}
	for in := range p.inputs {
		out.Inputs = append(out.Inputs, in)
	}
	slices.Sort(out.Observed)
	slices.Sort(out.Inputs)
	return out
}
