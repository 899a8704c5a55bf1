// Package render is the one door from a compiled template and a parent to
// the desired children: Render evaluates the template for the parent,
// always under the Limits, and turns the template's children into the
// objects the engine applies. The reconcile, the rollout's hold check,
// `engine diff` (and `diff --revision`), `engine render` and `engine test`
// all come through it, so each is bound by the same limits and refuses the
// same children.
//
// It owns:
//
//   - Render and its Options: one evaluation (templates.Template.Evaluate)
//     bounded by Limits.EvaluationTimeout, its result refused whole over
//     Limits.MaxChildren or Limits.MaxRenderedBytes, each limit's reason a
//     contract.Reason* constant; the evaluations that outlive the timeout
//     are counted by the metric engine_evaluations_overrunning, registered
//     in controller-runtime's metrics.Registry;
//   - Observe, the one door for what a template sees of a parent: its
//     references resolved and placed by the policy (ResolveReferences),
//     read through a ReferenceReader (the engine's cache, LiveReader for
//     a client, Given offline), their views (Observed) merged over the
//     observed state of the children and resources, every missing one in
//     a MissingReferencesError;
//   - the desired children (Desired): the template's object with the
//     namespace defaulted to the parent's, the engine's labels and
//     annotations (contract), a controller owner reference to the parent,
//     and the template's policy on where children may go enforced; whether
//     a kind is namespaced comes from a Scoper (MapperScoper from the
//     cluster's REST mapper, OfflineScoper without a cluster);
//   - Error, the typed error of a rendering refused: a limit exceeded or
//     a child the policy refuses (ChildError), with the Synced condition's
//     reason. The reconciler classifies it terminal with that reason
//     (reconciler/errors.go);
//   - the live-children index: which listed objects are provably the
//     parent's own (OwnedOf, IsOurs: an owner reference, or the parent's
//     Inventory for children that cannot carry one, with each entry's
//     Proofs, proof.go: the hash of the token the engine creates the child
//     with, then its UID; labels prove nothing),
//     their content as unstructured (OwnedChildren.Read), matched to the
//     desired children by ChildKey (KeyOf, ObjectKeyOf), and what the
//     template sees as observed (LiveChildren.Observed: the children by
//     local name, and the external resources' state as the parent's
//     status.resources last recorded it);
//   - the two answers the reconciler's apply and engine diff's dry run must
//     give alike: whose is the object that already holds a new child's name
//     and whether the parent adopts it (HolderOf: by the same proof as
//     IsOurs, or a grant, contract.AnnotationAdoptBy, written on the object
//     for this parent; the conflict's text otherwise), and what is sent of a
//     desired child (WithAppliedHash: annotated with its AppliedHash, by
//     which an unchanged child is not applied again);
//   - Offline and Given, the rendering of `engine render --observed` and
//     `engine test`: the given live objects matched to the references and
//     to every child rendered so far, rendered again until the matches
//     settle, as the reconciles converge; a failure for want of the
//     metadata the apiserver gives every object is a MissingMetadataError;
//   - Budget, the one memory of the objects whose inputs went over a
//     limit, shared by every path that renders (Options.Budget), and the
//     cap on what the evaluations past the timeout may hold engine-wide:
//     an object whose evaluation overran is refused
//     (contract.ReasonEvaluationBudgetExceeded) while
//     --max-overrunning-evaluations are running or the heap is over
//     --max-evaluation-heap; counted by engine_evaluations_refused_total.
//     Past --max-evaluation-heap-hard of resident memory while evaluations
//     past the timeout run, Budget.WatchHeap reports them, for the engine
//     to record and exit (heapbar.go).
//
// It does not write to the apiserver and keeps no reconcile state but the
// Budget its callers share: it reads the objects it is given and returns
// what to apply; its reads of the cluster are HolderOf's get and
// LiveReader's, through the client its caller passes. Applying, pruning, recording the inventory and the resources on
// the parent, the status and its conditions are package reconciler's. It
// imports templates and contract, never reconciler, engine or providers.
package render
