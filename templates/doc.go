// Package templates turns a directory of CUE templates into immutable,
// compiled snapshots and evaluates one parent object at a time against them.
//
// A templates directory holds one template per top-level .cue file and one
// per subdirectory (all .cue files of that directory form one package). A
// cue.mod/ at the root makes the directory a CUE module, so templates can
// import shared packages from it. Load skips hidden and "_" entries and the
// test cases under tests/ (Skipped).
//
// What the package does, by file:
//   - load.go, compile.go, compileonly.go, restore.go, storable.go: read a
//     directory (or a stored revision's files) and compile each template
//     once into a Template: its value, parent kind, hash, and the
//     compile-only blocks (crd, policy, rollout, versions) taken out of what an
//     evaluation unifies with.
//   - crd.go, admit.go, prune.go: the CRD of the parent kind (its schema,
//     @immutable() rules and the constraints it cannot carry come from
//     templates/openapi), its defaults checked as the apiserver checks
//     them, the constraints for the admission webhook (Constraints,
//     NeedsAdmission), and a parent admitted and pruned as the apiserver
//     would store it.
//   - graph.go, kinds.go, references.go, growth.go, defaults.go: what the
//     source says: the dependency graph (built by templates/graph), its
//     child and reference kinds, its references, and engine vet's
//     warnings (unbounded growth, merging defaults). What a template reads
//     of the parent and of observed state, to trim its inputs and memoize,
//     comes from templates/reads.
//   - policy.go, clusters.go: the checks of a cluster-scoped parent's
//     policy and of a child's cluster field; templates/policy decodes the
//     policy and rollout blocks.
//   - childschema.go, childschema_errors.go, leftfields.go: the child
//     check: every child unified with its kind's schema (templates/openapi
//     finds it), each conflict an error at the user's line; a child's
//     ownership field.
//   - evaluate.go, ready.go, memo.go, document.go: Evaluate one parent
//     (and what it observes) into children, resources, status and
//     readiness, with a memo of recent results; a resource as the CLI
//     shows it.
//   - versions.go, convert.go: the versions block (the parent kind's
//     versions, their CRD schemas and conversion webhook), Convert (a
//     parent from one version to another through the hub, with the CUE of
//     toHub and fromHub) and RoundTrips (the fields a conversion loses).
//   - errors.go: Error and Problem, every message at file:line:col.
//
// It knows nothing about Kubernetes clients or reconciling: the engine asks
// a compiled Template to Evaluate one parent and acts on the Result.
//
// Below it, importing nothing of it: templates/openapi (CUE<->OpenAPI, the
// schemas of child kinds, what the CRD cannot carry), templates/graph (the
// dependency graph from the syntax), templates/reads (what a template
// reads, from the syntax) and templates/policy (the policy and rollout
// blocks); it imports those and contract, nothing else of this module. Above it: templates/watch (hot reload) and templates/rbac
// (engine rbac), which it must not import; templates/crdcompat (breaking
// CRD changes) needs nothing of it (hack/imports.sh).
package templates
