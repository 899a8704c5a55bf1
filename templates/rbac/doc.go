// Package rbac generates the least-privilege roles of an engine serving a
// set of templates (engine rbac): a ClusterRole for the parent kinds, the
// child kinds the templates can produce and the kinds they reference, a
// Role per namespace of the engine's own objects, and their bindings. It
// also warns about the children the roles cannot grant, or the policy may
// refuse: those whose kind or namespace the source computes (engine vet,
// engine rbac). For a workload cluster (engine rbac --cluster) it
// generates the ClusterRole of the kinds the templates may put there.
//
// It reads compiled templates through their exported methods (ChildKinds,
// ChildKind, ChildClusters, ReferenceKinds, DeclaredReferences, CRD,
// Policy, Files): it
// imports templates and nothing else of this module, and templates never
// imports it (hack/imports.sh).
package rbac
