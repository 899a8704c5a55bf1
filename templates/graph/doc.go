// Package graph reads a template's dependency graph from its source: which
// children, resources and references it declares (by local name), what
// each depends on (observed.<name>, a field of another child, an explicit
// dependsOn) and, for one declared under an if, for or let clause, what
// its presence reads (Presence, whether pruning can wait out a transient
// change). It checks what the source states: a dependsOn naming nothing,
// itself or a reference, a local name declared in two sections, a
// reference that depends on anything, a cycle; each is a Problem at the
// user's line.
//
// It works on syntax alone (cuelang.org/go/cue/ast): it neither compiles
// nor evaluates, and knows nothing of templates, parents or the cluster.
// The templates package builds a Graph for each template it compiles and
// turns its problems into the template's Error; the reconciler orders
// creation and deletion by it and engine graph draws it. It imports
// nothing of this module, and templates imports it, never the reverse
// (hack/imports.sh).
package graph
