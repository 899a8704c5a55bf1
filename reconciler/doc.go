// Package reconciler is one parent's reconcile: it brings a parent's
// children, external resources and status in line with the template of its
// kind. The engine builds one Reconciler per templated parent kind (New)
// and runs it in that kind's controller.
//
// It owns applying and pruning children, the external resources through
// their providers, the finalizer, the status and its conditions, events,
// the one error taxonomy and the status writer. It does not own the
// per-kind controllers, their watches and the child cache, the revisions
// and their rollout, CRDs, sharding or stall tracking: those are package
// engine's, which reaches the reconciler through New and Reconcile, and
// which the reconciler reaches only through small interfaces (Kind,
// Children, controller-runtime's client). It never loads CUE files, nor
// evaluates a template itself: package render turns a compiled
// templates.Template and one parent into the desired children, under the
// limits.
//
// # One reconcile, step by step
//
// Reconcile (reconciler.go) is the table of contents, and this list
// follows it in its order. Each step takes the parent and what the step
// before it produced, records its findings on the status under
// construction, and returns a typed outcome; the deferred finish
// (reconciler.go) turns them into the status and the result:
//
//  1. paused.go (paused): a parent annotated engine.cuengine.dev/paused:
//     "true" ends here; nothing is observed, evaluated or written but its
//     Paused condition. It comes first, so a pause holds a deletion too.
//  2. deletion.go (reconcileDelete): a parent being deleted has its
//     external resources deleted (or orphaned) from the records on it, and
//     the children the garbage collector cannot reach or that take part in
//     a dependency, dependents first (order.go: a thing goes once
//     everything that depends on it is gone, one step per reconcile, each
//     brought by the event of the one before), those in workload clusters
//     included (remoteprune.go), then loses its finalizer. It runs before
//     any evaluation, so a broken template never blocks a deletion.
//  3. observe.go (observe): the parent's live children, from the
//     label-selected child cache (Children; built-in kinds typed, read in
//     protobuf; others unstructured: the engine's childobjects.go), those
//     provably its own (render.OwnedOf).
//  4. references.go (readReferences): the objects the template reads
//     (references), each allowed by the policy, a missing one waited for
//     (ReferenceNotFound) without changing anything.
//  5. remote.go (observeRemote): the parent's children in each workload
//     cluster its inventory names, through the Clusters interface; a
//     cluster that cannot be used is a ClusterError, reported, and nothing
//     there is touched or forgotten.
//  6. settled.go (isSettled): the same inputs as the last reconcile that
//     changed nothing (template revision, parent generation and metadata,
//     children's and references' resource versions) end the reconcile
//     here, for a parent with no children in other clusters. Otherwise
//     the children are read as unstructured (typed ones converted),
//     indexed by kind, namespace, name and local name
//     (render.LiveChildren).
//  7. evaluate.go (evaluate): the template turns the parent, the
//     references and what is observed, here and in other clusters, into
//     the desired children (policy enforced, engine labels and owner
//     reference added), the external resources and the template's status,
//     through render.Render, under the limits and the engine's one
//     render.Budget (limits.go), which remembers the parents that went
//     over one on any path and refuses, for a while, those that overran.
//  8. resources.go (reconcileResources): each provider applies the
//     resources whose names are recorded on the parent; a new resource
//     only gets a name planned, and a resource dropped from the template
//     is deleted (providercalls.go counts the calls);
//     connectionsecret.go (withConnectionSecrets) adds the Secrets that
//     carry the resources' connection details to the children.
//  9. evaluate.go (reevaluate): when a resource appeared or changed, the
//     template sees it now, so a child that depends on it is applied in
//     the same reconcile.
//  10. remote.go (splitRemote): the desired children are split by cluster,
//     the engine's own going on through the steps below, those of each
//     workload cluster (a child's cluster field) kept for remoteapply.go
//     and remoteprune.go.
//  11. record.go (record): the one write in the middle of a reconcile. The
//     finalizer, the name of each resource and the inventory of the
//     children that cannot carry an owner reference (those of other
//     namespaces and clusters, with their cluster) are stored on the
//     parent before any of them is ever created, which is what makes a
//     crash at any point leak nothing. A reconcile that records ends here;
//     the watch event of the write starts the next one.
//  12. apply.go (applyChildren): server-side apply of each child that is
//     missing or drifted, drift judged as the apiserver stores values
//     (drift.go: a dry-run apply, its verdict remembered per child
//     version); an object this parent does not control is never touched,
//     unless its owner granted it to the parent (adopt.go: its fields
//     taken over from the previous managers, then applied as a child).
//     remoteapply.go (applyRemote) does the same in each workload cluster,
//     create-only where the name is free, the proof of ownership being
//     the inventory, the parent-uid label and the entry's proof
//     (render.Proofs: a child without an owner reference, here or there,
//     is created with a token whose hash the parent holds, then known by
//     its UID; no owner reference crosses clusters).
//  13. prune.go (prune): children the template no longer produces are
//     deleted, dependents first (order.go), as resources the template
//     dropped are in step 8; remoteprune.go (pruneRemote) in the workload
//     clusters.
//  14. ready.go (setReady): Ready from the template's ready field, or from
//     kstatus on every child, remote ones included, and the resources'
//     readiness.
//  15. settled.go (settle), then status.go in the deferred finish: after
//     child writes the status is left to the reconcile their events
//     bring; otherwise the finish builds it and hands it to the kind's
//     status writer (statuswriter.go, run by StartStatus), which writes it
//     on goroutines of its own, once and only if it changed, the latest
//     status of a parent replacing one not written yet. This is the only
//     status write, deletion and pause included; a cluster that could not
//     be used is reported on it (remote.go, report).
//
// The status under construction is typed: conditions.go (Synced and
// Ready; their types and reasons, like every label and annotation the
// engine writes, are package contract's), resourcestatus.go
// (status.resources), templatestatus.go (the template's own fields). Every
// error is classified in one place, errors.go: terminal (a bad spec or
// template, a refused child, a render.Error from anywhere: recorded,
// counted through reconcile.TerminalError, not retried until something
// changes), waiting (an optimistic-lock conflict, a resource to observe
// again later: requeued after a delay) or transient (anything else: the
// controller's backoff, RetryLimiter). The reconciles' metrics (template
// evaluations, limits exceeded, provider calls) are registered in
// metrics.go, under the names the engine has always served.
//
// The unit tests (unit_*_test.go, harness in unit_env_test.go) build a Reconciler with New
// on controller-runtime's fake client, with fakes for Kind and Children,
// without a cluster.
package reconciler
