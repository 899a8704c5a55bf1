// Package engine is the composition root of the generic reconciler: one
// dynamic controller per templated parent kind, each reconciling its
// parents into the children and external resources its compiled template
// describes.
//
// One parent's reconcile (the steps, the status and its conditions, the
// error taxonomy, events, the status writer) is package reconciler's; its
// package doc walks through it step by step. Rendering a template for a
// parent, under the limits, is package render's; the template revisions
// and the health and undo rules are package revisions'; moving parents to
// a new revision is package rollout's; `engine diff` is package diff's;
// the keys the engine writes on objects are package contract's; CUE is
// package templates'. This package assembles them and owns what a kind
// needs around its reconciles (docs/architecture.md: the import and lock
// rules):
//
//   - engine.go: Options, New and Start; the label-selected parent and
//     child caches and the child cache's parent-uid index; SetTemplates
//     and the kinds it starts, swaps and retires; Status, for readiness.
//   - controllers.go: the per-kind controller (kindController): its
//     lifecycle (started until its parent kind is served, stopped when its
//     template is removed), its watches (the parents, and every child kind
//     as the template or a reconcile first names it), the parent of a child
//     event, and the reconciler.Reconciler it builds with reconciler.New,
//     implementing reconciler.Kind (the template a parent is reconciled
//     with) and reconciler.Children (the parent's children, from the child
//     cache's parent-uid index), and rollout.Kind for the kind's rollout
//     coordinator, which it starts and stops with the controller.
//   - references.go, refindex.go: the engine's one cache of referenced
//     objects, holding only what the parents read (a watch per distinct
//     reference, shared, stopped when no parent reads it), and the index
//     from each reference to the parents its events requeue.
//   - clusters.go: the workload clusters (Options.Clusters): a
//     clusters.Registry run while a template's policy.clusters allows a
//     cluster, reconciler.Clusters per kind on it, a handler per cluster
//     and child kind that requeues the parent a remote child names, and a
//     requeue of the parents that use clusters when one comes, goes or
//     comes back.
//   - childobjects.go: how the child cache holds each child kind (built-in
//     kinds typed, read in protobuf; others unstructured).
//   - migrate.go: moving the stored objects of those kinds to the storage
//     version (migration.Migrator), as the leader.
//   - remotecalls.go: every call a reconcile makes to a workload cluster
//     ends within Options.ClusterCallTimeout, and one that does not marks
//     the cluster down until its probe answers.
//   - parentcache.go: the parent cache's transform, which keeps each
//     parent's spec and status as one JSON string until a reconcile reads
//     it; parentindex.go: the child caches' parent-uid index and the List
//     by it (listByParentUID), here and in workload clusters.
//   - informersync.go: a cache as one controller's watch sees it, waiting
//     for that watch's informer only, so that one kind whose list fails
//     does not hold the others' controllers.
//   - discovery.go: retrying the parents refused for a kind the cluster
//     did not serve yet, when its CRDs change.
//   - childschemas.go: the cluster's OpenAPI documents (ClusterSchemas),
//     cached by their hash, that a load of the templates checks children
//     of other operators' kinds against.
//   - crds.go, conversion.go: installing the templates' CRDs, refusing a
//     change that could break stored objects, and naming the conversion
//     webhook in those of kinds with several versions;
//     storedfallback.go: serving a kind from its newest stored revision
//     when its files' template is too large to store as one.
//   - heapbar.go: the last resort at the budget's hard heap bar (the
//     overrunning parents annotated, then the manager stopped for a
//     restart).
//   - fence.go: under sharding, every write for a parent checks that the
//     replica still holds its shard's Lease and the parent its shard.
//   - metrics.go: the engine's Prometheus metrics, per kind.
//   - restmapper.go: the manager's REST mapper, remembering the mappings.
//   - reload.go: Reload, the hot reload of the templates directory.
//   - stall.go: stall tracking, a kind whose every worker is held too long.
//   - sharding.go: the sharding gate in front of each kind's reconciler.
//
// # From a watch event to the template
//
// An event on a parent, or on a child that names it, queues the parent's
// key on its kind's controller (controllers.go, kindController.run builds
// it on controller-runtime's controller package, with
// MaxConcurrentReconciles workers). A worker takes the key and calls the
// chain run wraps around the kind's reconciler: stall.go's workers.wrap
// (counting the time each worker is held), then sharding.go's Engine.gate
// (dropping a key this replica's shard does not own), then
// reconciler.Reconciler.Reconcile, which picks the parent's template
// revision (controllers.go's TemplateFor, from package rollout) and
// evaluates it through package render (in process, or in an evaluator process of package evaluator for
// a template that may run away).
//
// The integration tests (engine_test.go and the others) run the assembled
// engine against a bare kube-apiserver and etcd from bin/, and skip under
// -short; the unit tests here (stall tracking, child objects) need no
// cluster.
package engine
