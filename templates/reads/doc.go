// Package reads finds in a template's source what it reads of the values
// the engine fills in: which paths of the parent (metadata, status) and of
// observed (observed.deployment.status.readyReplicas), and the top-level
// fields its files declare. Evaluation hands CUE only those parts (a Set's
// Filter and Parent) so that a large live object costs only what the
// template reads of it, and so that a field nobody reads does not make an
// evaluation look new to the template's memory.
//
// It scans syntax alone and is conservative: a use it cannot follow (an
// alias, a bare `observed`, an index) reads everything. It neither compiles
// nor evaluates; the templates package scans each template once when it
// compiles it. It imports nothing of this module, and templates imports
// it, never the reverse (hack/imports.sh).
package reads
