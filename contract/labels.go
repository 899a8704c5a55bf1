package contract

import "strconv"

// Labels and annotations the engine puts on every child. The label selector
// managed-by=engine restricts the engine's child informers to its own objects.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedByValue = "engine"
	LabelParentUID = "engine.cuengine.dev/parent-uid"
	LabelChild     = "engine.cuengine.dev/child"
	// AnnotationParent names the child's parent, in ParentRef's format.
	AnnotationParent = "engine.cuengine.dev/parent"
	// AnnotationAppliedHash holds a hash of the desired object last applied,
	// so an unchanged child is not applied again.
	AnnotationAppliedHash = "engine.cuengine.dev/applied-hash"
	// AnnotationDependsOn lists, comma-separated, the local names of the
	// children and resources a child depends on (the template's graph), so
	// deletion orders them from the live objects alone (engine/order.go).
	AnnotationDependsOn = "engine.cuengine.dev/depends-on"
	// AnnotationOwnership lists, comma-separated and sorted, the fields of
	// a child the template leaves to other writers (its ownership field),
	// each as path=mode: "metadata.annotations=Shared,spec.replicas=CreateOnly".
	// The engine reads it from the desired child when it applies.
	AnnotationOwnership = "engine.cuengine.dev/ownership"
	// AnnotationConnectionSecretOf marks a Secret the engine writes for an
	// external resource's connectionSecret; its value is the resource's
	// local name. Such a Secret is never part of what the template sees as
	// observed: it holds the resource's sensitive outputs.
	AnnotationConnectionSecretOf = "engine.cuengine.dev/connection-secret-of"
	// AnnotationConnectionSecretSums holds, on a connection Secret, a
	// keyed hash of each value the engine wrote (JSON, key to hex
	// HMAC-SHA256 keyed by the parent's UID), never a value: a key changed
	// or removed by someone else is found, and a credential the engine
	// cannot restore (it keeps none) is reset with the provider.
	AnnotationConnectionSecretSums = "engine.cuengine.dev/connection-secret-sums"
)

// The modes of a field a template leaves to other writers (a child's
// ownership field).
const (
	// OwnershipCreateOnly: the template's value is the child's when it is
	// created; after that the live value is kept, whoever writes it.
	OwnershipCreateOnly = "CreateOnly"
	// OwnershipShared, of a map: the keys the template sets are the
	// template's, and the engine removes no other key.
	OwnershipShared = "Shared"
)

// FieldManager is the server-side apply field manager of every write.
const FieldManager = "engine"

// Labels, annotations and the finalizer the engine puts on parents, and
// those users put on parents for the engine.
const (
	// Finalizer keeps a parent until the engine has deleted what the
	// garbage collector cannot: external resources, and children outside
	// the parent's namespace.
	Finalizer = "engine.cuengine.dev/finalizer"
	// AnnotationResourcePrefix + local name records an external resource on
	// the parent before it is created: the source of truth for its name.
	AnnotationResourcePrefix = "resources.engine.cuengine.dev/"
	// AnnotationInventory on a parent lists the children the engine created
	// that cannot carry an owner reference to it: those in other namespaces and
	// cluster-scoped ones. An entry is recorded before the child is created.
	AnnotationInventory = "engine.cuengine.dev/inventory"
	// AnnotationInventoryProofs on a parent is a JSON object: for each entry
	// of AnnotationInventory, how the engine knows the object there is the
	// one it created, "uid:" and the object's UID
	// once it has seen it, "token:" and the SHA-256 of the
	// AnnotationCreateToken it creates it with until then. Labels can be
	// copied by anyone who may create an object; a UID or a token no one
	// else knows cannot.
	AnnotationInventoryProofs = "engine.cuengine.dev/inventory-proofs"
	// AnnotationCreateToken, on a child the engine creates without an
	// owner reference (in another namespace, cluster-scoped, in a workload
	// cluster), is a secret of the engine's process (an HMAC of the parent's
	// UID and the child's inventory entry) whose hash the parent's
	// AnnotationInventoryProofs records before the create: it proves the
	// object the engine's create made, should the engine stop before it
	// records the object's UID.
	AnnotationCreateToken = "engine.cuengine.dev/create-token"
	// AnnotationAdoptBy, on an existing object that holds a child's name,
	// grants it to a parent: its value names the parent in ParentRef's
	// format, or is the parent's UID. Only someone who may write the object
	// can write it, so the grant is its owner's word: the engine takes the
	// object over (controller reference, labels, and the fields of its
	// previous managers), and removes the grant as it does. An object
	// another controller controls is never adopted.
	AnnotationAdoptBy = "engine.cuengine.dev/adopt-by"
	// AnnotationDeletionPolicy on a parent overrides the template's
	// deletionPolicy for all its resources; "Orphan" keeps them.
	AnnotationDeletionPolicy = "engine.cuengine.dev/deletion-policy"
	// AnnotationTemplateRevision on a parent pins it to a revision number,
	// whatever the files say, within the newest template's rollout policy
	// for pins and under its policy for children (revisions.PinRefused);
	// removing it lets the parent follow.
	AnnotationTemplateRevision = "engine.cuengine.dev/template-revision"
	// AnnotationEvaluationOverran, on a parent, records that its evaluation
	// ran past --evaluation-timeout: EvaluationOverranValue of the template's
	// hash and the parent's generation it overran with. An engine, restarted
	// or not, refuses such a parent without evaluating it
	// (ReasonEvaluationBudgetExceeded) while both are the same; the engine
	// removes it once either changed. Removing it by hand retries.
	AnnotationEvaluationOverran = "engine.cuengine.dev/evaluation-overran"
	// AnnotationRolloutTo, on a parent, is the hash of the revision the rollout
	// coordinator moved it to. Under sharding the coordinator and the shard
	// reconciling the parent are different replicas: the annotation is how the
	// shard learns, and its update event is what brings the reconcile.
	AnnotationRolloutTo = "engine.cuengine.dev/rollout-to"
	// AnnotationPaused, "true" on a parent, pauses it: the engine writes
	// nothing for it (children, external resources, its status) but the
	// Paused condition, and a deletion waits at the finalizer. Removing it
	// reconciles the parent once.
	AnnotationPaused = "engine.cuengine.dev/paused"
	// AnnotationReconcileRequestedAt, any string on a parent: a new value
	// makes the engine reconcile it at once, its external resources
	// observed again, and record the value it handled in
	// status.lastHandledReconcileAt (Flux's convention), so a client can
	// wait for it.
	AnnotationReconcileRequestedAt = "engine.cuengine.dev/reconcile-requested-at"
	// LabelCanary, "true" on a parent, puts it in a rollout's first wave,
	// only where the template's rollout policy lets it count
	// (rollout: canary: objectLabel: true); by default it does not.
	LabelCanary = "engine.cuengine.dev/canary"
)

// Labels of sharding.
const (
	// LabelShard, under sharding, names the engine replica (shard) that
	// reconciles a parent; its children carry it too, so each replica's
	// caches select only its share (engine/sharding.go).
	LabelShard = "engine.cuengine.dev/shard"
	// LabelDrain, "true" on a parent, asks its shard to stop reconciling it
	// and give it up (remove this label and LabelShard) so the sharder can
	// assign it to another.
	LabelDrain = "engine.cuengine.dev/drain"
	// LabelShardGroup, on a shard's Lease, names the engine deployment it is a
	// shard of (the leader election id), so the sharder lists its own shards.
	LabelShardGroup = "engine.cuengine.dev/shard-group"
	// LabelCluster, on a Secret in the engine's namespace, registers a
	// workload cluster: its value is the cluster's name, the Secret's
	// KeyKubeconfig its kubeconfig (package clusters).
	LabelCluster = "engine.cuengine.dev/cluster"
	// KeyKubeconfig is the key of a cluster Secret's kubeconfig.
	KeyKubeconfig = "kubeconfig"
	// AnnotationCluster, on a child the engine puts in a registered
	// workload cluster, names that cluster (a template's cluster field).
	// It marks the child as remote: it carries no owner reference, and its
	// entry in the parent's AnnotationInventory is a RemoteRef.
	AnnotationCluster = "engine.cuengine.dev/cluster"
)

// Annotations of the CRDs the engine generates from the templates (they
// also carry LabelManagedBy: ManagedByValue).
const (
	// AnnotationCRDTemplate is the path of the kind's template.
	AnnotationCRDTemplate = "engine.cuengine.dev/template"
	// AnnotationCRDTemplateHash is the template's content hash. It is the
	// key of AnnotationTemplateRevision, which on a parent holds a revision
	// number (see the package documentation).
	AnnotationCRDTemplateHash = "engine.cuengine.dev/template-revision"
)

// EvaluationOverranValue is AnnotationEvaluationOverran's value for an
// evaluation of the template of that hash that overran on the parent's
// generation.
func EvaluationOverranValue(templateHash string, generation int64) string {
	return "template " + templateHash + ", generation " + strconv.FormatInt(generation, 10)
}
