// Package templates turns a directory of CUE templates into immutable,
// compiled snapshots and evaluates one parent object at a time against them.
//
// A templates directory holds one template per top-level .cue file and one
// per subdirectory (all .cue files of that directory form one package). A
// cue.mod/ at the root makes the directory a CUE module, so templates can
// import shared packages from it.
//
// The package owns loading, compiling, evaluating, error positions, CRD and
// OpenAPI schema generation, the dependency graph of a template's children
// and resources (graph.go: what the source says depends on what) and hot
// reload. It knows nothing about Kubernetes
// clients or reconciling: the engine package asks a compiled Template to
// Evaluate one parent and acts on the Result.
package templates
