// Package revisions is the record of a kind's template versions: every
// accepted version of a kind's template is a revision, an apps/v1
// ControllerRevision in the engine's namespace, named after the kind and
// the template's content hash (RevisionName), numbered in sequence per
// kind, holding the template's files. The rollout of a revision is recorded
// in the revision's annotations (contract.AnnotationRollout*), so every
// replica and a restarted engine agree on it, and kubectl and the command
// line can read and change it.
//
// It owns:
//
//   - the store of the ControllerRevisions (Store): recording a template
//     as a revision, renumbering one whose content comes back, writing a
//     rollout's state into its annotations, pruning old ones; the object
//     it writes (ObjectOf), and reading them back (ListRevisions,
//     RevisionOf, LoadRevision);
//   - the vocabulary the engine writes there and the command line reads:
//     Revision, and the phases of a rollout (Phase);
//   - the one rule for a parent healthy on a revision (ReadyOn), which the
//     rollout's health gates apply and `engine rollout status` counts;
//   - the one rule for the revision a rollback returns to (UndoTarget),
//     which the rollout coordinator moves the parents to and `engine
//     rollout undo` names;
//   - how a reader outside the engine finds a kind's revisions (Find,
//     Select: one namespace, the template's current version) and the
//     fleet view of them (FleetOf: per revision, the parents that run it,
//     are healthy on it, stalled or pinned to it), which `engine rollout`
//     and `engine diff --revision` print.
//
// It does not own moving parents from one revision to another: that is the
// rollout coordinator's (package rollout), which decides the
// phases and writes them through the Store. Nor the names of the
// annotations and labels, which are package contract's.
//
// It imports templates and contract, and no package of the engine's.
package revisions
