package engine

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Labels and annotations the engine puts on every child. The label selector
// managed-by=engine restricts the engine's child informers to its own objects.
const (
	LabelManagedBy   = "app.kubernetes.io/managed-by"
	ManagedByValue   = "engine"
	LabelParentUID   = "engine.cuengine.dev/parent-uid"
	LabelChild       = "engine.cuengine.dev/child"
	AnnotationParent = "engine.cuengine.dev/parent"
	// AnnotationAppliedHash holds a hash of the desired object last applied,
	// so an unchanged child is not applied again.
	AnnotationAppliedHash = "engine.cuengine.dev/applied-hash"
	// AnnotationDependsOn lists, comma-separated, the local names of the
	// children and resources a child depends on (the template's graph), so
	// deletion orders them from the live objects alone (order.go).
	AnnotationDependsOn = "engine.cuengine.dev/depends-on"
	// LabelShard, under sharding, names the engine replica (shard) that
	// reconciles a parent; its children carry it too, so each replica's
	// caches select only its share (sharding.go).
	LabelShard = "engine.cuengine.dev/shard"
	// LabelDrain, "true" on a parent, asks its shard to stop reconciling it
	// and give it up (remove this label and LabelShard) so the sharder can
	// assign it to another.
	LabelDrain = "engine.cuengine.dev/drain"
	// FieldManager is the server-side apply field manager of every write.
	FieldManager = "engine"
)

// ParentRef names a parent in the AnnotationParent format: Kind.group/namespace/name.
func ParentRef(parent *unstructured.Unstructured) string {
	gvk := parent.GroupVersionKind()
	return fmt.Sprintf("%s/%s/%s", gvk.GroupKind().String(), parent.GetNamespace(), parent.GetName())
}
