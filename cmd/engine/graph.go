package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cuengine/engine/templates"
	"github.com/cuengine/engine/templates/graph"
)

type graphOptions struct {
	templates string
	format    string
}

func newGraphCommand() *cobra.Command {
	o := &graphOptions{}
	cmd := &cobra.Command{
		Use:   "graph [KIND]",
		Short: "Print the dependency graph of each template (or of KIND) as Graphviz DOT or Mermaid",
		Long: `Print what each child and resource of a template depends on, as the template's
references show (observed.X, children.X) and its dependsOn fields say: the parent
on top, an arrow from each thing to what it depends on. Read downwards, it is
the order of deletion; upwards, the order of creation. References (objects the
template reads and does not own) are drawn as inputs.

KIND is a kind (Storefront), a template name (storefront) or kind.group.

  engine graph --templates DIR Storefront | dot -Tsvg > storefront.svg
  engine graph --templates DIR --format mermaid Storefront   # for a README`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			write, ok := graphWriters[o.format]
			if !ok {
				return &exitError{code: 2, msg: fmt.Sprintf("--format %q: want dot or mermaid", o.format)}
			}
			set, err := templates.Load(o.templates)
			if err != nil {
				return &exitError{code: 1, msg: err.Error()}
			}
			list := set.Templates()
			if len(args) == 1 {
				t, err := findTemplate(set, args[0])
				if err != nil {
					return &exitError{code: 1, msg: err.Error()}
				}
				list = []*templates.Template{t}
			}
			for i, t := range list {
				if i > 0 {
					fmt.Fprintln(cmd.OutOrStdout())
				}
				write(cmd.OutOrStdout(), t)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.templates, "templates", "templates", "templates directory")
	cmd.Flags().StringVar(&o.format, "format", "dot", "dot or mermaid")
	return cmd
}

// findTemplate finds a template by its kind, kind.group or name.
func findTemplate(set *templates.Set, name string) (*templates.Template, error) {
	var names []string
	for _, t := range set.Templates() {
		gk := t.GVK.GroupKind()
		if strings.EqualFold(name, gk.Kind) || strings.EqualFold(name, gk.String()) || name == t.Name {
			return t, nil
		}
		names = append(names, gk.Kind)
	}
	return nil, fmt.Errorf("no template for %q (the templates are for %s)", name, strings.Join(names, ", "))
}

var graphWriters = map[string]func(io.Writer, *templates.Template){"dot": writeDOT, "mermaid": writeMermaid}

// graphNode is a node as drawn: an identifier and a label.
type graphNode struct {
	id, label string
	resource  bool
	reference bool // read, never written: an input
}

func drawn(t *templates.Template, n graph.Node) graphNode {
	label := n.Name
	if n.Type != "" {
		label += ": " + n.Type
	}
	if n.Kind == graph.ChildNode {
		if cluster, ok := t.ChildClusters()[n.Name]; ok {
			label += " " + clusterLabel(cluster)
		}
	}
	if n.Kind == graph.ReferenceNode {
		label += " (reference)"
	}
	return graphNode{id: string(n.Kind) + "." + n.Name, label: label, resource: n.Kind == graph.ResourceNode, reference: n.Kind == graph.ReferenceNode}
}

// entryPoints are the nodes nothing depends on: the parent's arrows go to
// them, so the parent is on top and each thing below what depends on it.
func entryPoints(g *graph.Graph) []graph.Node {
	needed := map[string]bool{}
	for _, n := range g.Nodes {
		for _, d := range n.DependsOn {
			needed[d.Name] = true
		}
	}
	var out []graph.Node
	for _, n := range g.Nodes {
		if !needed[n.Name] {
			out = append(out, n)
		}
	}
	return out
}

// edges calls fn for each dependency, from a node to each node of the name
// it depends on.
func edges(g *graph.Graph, fn func(from, to graph.Node, via graph.Via)) {
	for _, n := range g.Nodes {
		for _, d := range n.DependsOn {
			for _, m := range g.Nodes {
				if m.Name == d.Name && m.Name != n.Name {
					fn(n, m, d.Via)
				}
			}
		}
	}
}

func title(t *templates.Template) string {
	return fmt.Sprintf("%s.%s (template %s): an arrow goes from a child or resource to what it depends on", t.GVK.Kind, t.GVK.GroupVersion(), t.Path)
}

func writeDOT(w io.Writer, t *templates.Template) {
	g := t.Graph()
	fmt.Fprintf(w, "// %s\n", title(t))
	fmt.Fprintf(w, "digraph %s {\n", strconv.Quote(t.GVK.Kind))
	fmt.Fprintln(w, "\trankdir=TB;")
	fmt.Fprintln(w, "\tnode [shape=box, fontname=\"Helvetica\"];")
	fmt.Fprintf(w, "\t\"parent\" [label=%s, shape=box, style=bold];\n", strconv.Quote(t.GVK.Kind+" (parent)"))
	for _, n := range g.Nodes {
		d := drawn(t, n)
		shape := ""
		switch {
		case d.resource:
			shape = ", shape=cylinder"
		case d.reference:
			shape = ", shape=note, style=dashed"
		}
		fmt.Fprintf(w, "\t%s [label=%s%s];\n", strconv.Quote(d.id), strconv.Quote(d.label), shape)
	}
	for _, n := range entryPoints(g) {
		fmt.Fprintf(w, "\t\"parent\" -> %s [style=dashed, arrowhead=none];\n", strconv.Quote(drawn(t, n).id))
	}
	edges(g, func(from, to graph.Node, via graph.Via) {
		fmt.Fprintf(w, "\t%s -> %s [label=%s];\n", strconv.Quote(drawn(t, from).id), strconv.Quote(drawn(t, to).id), strconv.Quote(string(via)))
	})
	fmt.Fprintln(w, "}")
}

func writeMermaid(w io.Writer, t *templates.Template) {
	g := t.Graph()
	ids, used := map[string]string{}, map[string]bool{"parent": true}
	for _, n := range g.Nodes {
		base := mermaidID(drawn(t, n).id)
		id := base
		for i := 2; used[id]; i++ {
			id = fmt.Sprintf("%s_%d", base, i)
		}
		ids[drawn(t, n).id], used[id] = id, true
	}
	id := func(n graph.Node) string { return ids[drawn(t, n).id] }
	fmt.Fprintf(w, "%%%% %s\n", title(t))
	fmt.Fprintln(w, "flowchart TD")
	fmt.Fprintf(w, "    parent[\"%s (parent)\"]\n", mermaidText(t.GVK.Kind))
	for _, n := range g.Nodes {
		d := drawn(t, n)
		switch {
		case d.resource:
			fmt.Fprintf(w, "    %s[(\"%s\")]\n", id(n), mermaidText(d.label))
		case d.reference:
			fmt.Fprintf(w, "    %s[/\"%s\"/]\n", id(n), mermaidText(d.label))
		default:
			fmt.Fprintf(w, "    %s[\"%s\"]\n", id(n), mermaidText(d.label))
		}
	}
	for _, n := range entryPoints(g) {
		fmt.Fprintf(w, "    parent --- %s\n", id(n))
	}
	edges(g, func(from, to graph.Node, via graph.Via) {
		fmt.Fprintf(w, "    %s -->|%s| %s\n", id(from), via, id(to))
	})
}

// mermaidID makes an identifier Mermaid accepts: letters, digits and _.
func mermaidID(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, s)
}

// mermaidText escapes a label's quotes the way Mermaid reads them.
func mermaidText(s string) string { return strings.ReplaceAll(s, `"`, "#quot;") }

// clusterLabel says which workload cluster a child goes to: the one its
// template names, or one it computes per parent ("").
func clusterLabel(cluster string) string {
	if cluster == "" {
		return "(in the cluster its parent names)"
	}
	return "(in cluster " + cluster + ")"
}
