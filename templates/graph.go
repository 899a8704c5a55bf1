package templates

import (
	"cuelang.org/go/cue/token"

	"github.com/cuengine/engine/templates/graph"
)

// fieldDependsOn and fieldReadyWhen are the fields of a child that the
// engine takes out before applying it: what it depends on, and when it is
// ready. The graph reads both (templates/graph).
const (
	fieldDependsOn = graph.FieldDependsOn
	fieldReadyWhen = graph.FieldReadyWhen
)

// Graph returns the template's dependency graph (templates/graph). It is
// shared: callers must not modify it.
func (t *Template) Graph() *graph.Graph { return t.graph }

// graphOf builds the graph of one template from its files: its problems
// (a dependency on an unknown name, a cycle, ...) are the template's Error.
func graphOf(root, tmpl string, files []string) (*graph.Graph, error) {
	g, problems, err := graph.Of(files, func(p token.Pos) string { return position(root, p) })
	if err != nil {
		return nil, fromCUE(root, tmpl, err) // compile reports it first; be safe
	}
	if len(problems) > 0 {
		out := &Error{Template: tmpl, Problems: make([]Problem, len(problems))}
		for i, p := range problems {
			out.Problems[i] = Problem(p)
		}
		return nil, out
	}
	return g, nil
}
