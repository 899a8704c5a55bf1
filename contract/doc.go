// Package contract is the engine's vocabulary: the names it writes on
// objects in the cluster and reads back from them, and the formats of
// their values. It is the one place they are spelled; the engine, the
// templates, the sharder, the command line and the tests all use it.
//
// It owns:
//
//   - every label, annotation and finalizer the engine writes: on
//     children, on parents, on the templates' revisions
//     (ControllerRevisions), on the shards' Leases and on the CRDs it
//     generates; and the field manager of its server-side applies;
//   - the condition types (Synced, Ready) and every reason the engine sets
//     on them, and the reason of the event of a refused template reload;
//   - the parent status fields the engine owns (EngineStatusFields), as
//     opposed to those of the template's status block;
//   - the formats of kind and object names: KindString
//     ("MyKind.webapp.my.domain/v1"), TemplateKindLabel
//     ("mykind.webapp.my.domain") and ObjectRef / ParentRef
//     ("MyKind.webapp.my.domain/namespace/name");
//   - small pure readers of all this: FindCondition, ConditionIs,
//     ConditionsOf, GenerationObserved, ParentRevision, PinnedRevision,
//     ParseKindString.
//
// It does not own what the engine does with them (package engine), nor:
// the providers' reasons (providers.Reason*, which appear as Synced's
// reason when a resource fails), the values of the rollout phase
// annotation (revisions.Phase), the JSON of a resource record and of the
// inventory (engine/resources.go, render/ownership.go), the deletion
// policies (templates.DeletionPolicy*), event reasons other than
// ReasonTemplateReloadFailed, and the names of revisions (revisions.RevisionName).
//
// It imports nothing of this module, only the standard library and
// k8s.io/apimachinery, so any package can use it without depending on the
// engine.
//
// Every value here is stored in clusters: changing one strands the objects
// that carry the old one. A reader may accept an old format beside the
// new; a writer writes one.
//
// # One key in two maps
//
// A revision carries engine.cuengine.dev/template-kind twice: as a label
// (LabelTemplateKind, TemplateKindLabel's format, "mykind.webapp.my.domain",
// to select a kind's revisions) and as an annotation (AnnotationTemplateKind,
// KindString's format, "MyKind.webapp.my.domain/v1", the kind in full).
// Each (map, key) has one format and one formatter. They cannot share one:
// a label value cannot hold a "/" and is at most 63 characters (a long
// kind is digested), so the label cannot carry the version, case and full
// name the annotation exists for; and moving the annotation to a new key
// would hide the revisions a new engine writes from the engines and
// `engine rollout` commands already deployed (they select revisions by
// the annotation), during an upgrade or after a downgrade. The key stays
// as it is, with both constants documenting it.
//
// The CRDs the engine generates reuse engine.cuengine.dev/template-revision
// (AnnotationCRDTemplateHash) for the template's content hash, where a
// parent's AnnotationTemplateRevision is a revision number; it is kept for
// the same reason (the CRDs in clusters and charts carry it).
package contract
