package templates

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
	// (references.go): an input, which depends on nothing.
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

// fieldDependsOn is the field of a child or resource that lists its
// explicit dependencies. The engine takes it out of the child before
// applying it.
const fieldDependsOn = "dependsOn"

// fieldReadyWhen is the field of a child that says when it is ready
// (ready.go). The engine takes it out of the child before applying it;
// it is no dependency of the child, whatever it reads.
const fieldReadyWhen = "readyWhen"

// Graph returns the template's dependency graph. It is shared: callers must
// not modify it.
func (t *Template) Graph() *Graph { return t.graph }

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
// else that changes without the spec (templates.Presence), which the
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

// graphOf builds the graph of one template from its files and checks it:
// an explicit dependency on a name the template does not declare, or a
// cycle, is an error at the positions involved.
func graphOf(root, tmpl string, files []string) (*Graph, error) {
	s := &graphScan{root: root, top: map[string][]ast.Expr{}, topValue: map[ast.Node]string{},
		decls: map[nodeID]*decl{}, byValue: map[ast.Node]nodeID{}, containers: map[ast.Node]bool{}, sections: map[ast.Node]string{}}
	for _, f := range files {
		af, err := parser.ParseFile(f, nil)
		if err != nil {
			return nil, fromCUE(root, tmpl, err) // compile reports it first; be safe
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
	problems = append(problems, s.clashes()...) // references.go
	problems = append(problems, g.referenceInputs()...)
	if len(problems) == 0 {
		problems = g.cycles()
	}
	if len(problems) > 0 {
		return nil, &Error{Template: tmpl, Problems: problems}
	}
	return g, nil
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
	root string
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
				if name, _ := labelName(df.Label); name == fieldDependsOn {
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
	n := Node{Kind: id.kind, Name: id.name, Pos: position(s.root, d.pos)}
	field := "kind" // children and references
	if id.kind == ResourceNode {
		field = "provider"
	}
	for _, v := range d.values {
		if st, ok := v.(*ast.StructLit); ok && n.Type == "" {
			n.Type = literalField(st, field)
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
			problems = append(problems, Problem{Pos: position(s.root, f.Value.Pos()), Path: id.String() + "." + fieldDependsOn,
				Msg: `must be a list of local names, such as ["bucket"]`})
			continue
		}
		for _, nm := range names {
			switch {
			case nm.name == id.name:
				problems = append(problems, Problem{Pos: position(s.root, nm.pos), Path: id.String() + "." + fieldDependsOn,
					Msg: fmt.Sprintf("%s cannot depend on itself", id)})
			case !s.exists(nm.name):
				problems = append(problems, Problem{Pos: position(s.root, nm.pos), Path: id.String() + "." + fieldDependsOn,
					Msg: fmt.Sprintf("the template declares no child or resource named %q", nm.name)})
			case s.decls[nodeID{ReferenceNode, nm.name}] != nil:
				problems = append(problems, Problem{Pos: position(s.root, nm.pos), Path: id.String() + "." + fieldDependsOn,
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
	out := &Presence{Pos: position(s.root, guards[0].Pos())}
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
			if name, _ := labelName(f.Label); name == fieldReadyWhen {
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
		r.found[key] = Dependency{Name: name, Via: via, Pos: position(r.root, pos)}
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
