package render

import (
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
)

// ClusterOf is the workload cluster a desired or live child is put in
// (contract.AnnotationCluster), "" for the engine's own.
func ClusterOf(obj client.Object) string {
	return obj.GetAnnotations()[contract.AnnotationCluster]
}

// RemoteKey names a child of a workload cluster in the parent's inventory
// (contract.RemoteRef).
func RemoteKey(cluster string, obj client.Object) string {
	return contract.RemoteRef(cluster, obj.GetObjectKind().GroupVersionKind().GroupKind(), obj.GetNamespace(), obj.GetName())
}

// IsOursRemote reports whether obj, found in the workload cluster, is
// provably one of the parent's children. No owner reference can cross
// clusters, and labels can be copied, so the proof is the parent's
// inventory naming the child (with its cluster), its UID label, and the
// entry's proof (Proofs): the UID the engine saw, or the token it created
// the object with. An object someone else put at the name, however
// labelled, is not the parent's.
func IsOursRemote(parent *unstructured.Unstructured, cluster string, obj client.Object, inv Inventory, proofs Proofs) bool {
	key := RemoteKey(cluster, obj)
	return metav1.GetControllerOfNoCopy(obj) == nil &&
		obj.GetLabels()[contract.LabelParentUID] == string(parent.GetUID()) &&
		inv[key] && proofs.Proves(key, obj)
}

// RemoteEntry is one inventory entry of a workload cluster.
type RemoteEntry struct {
	Kind            schema.GroupKind
	Namespace, Name string
}

// Remote returns the inventory's entries of workload clusters, by cluster.
// An entry that does not parse is left out: it proves nothing.
func (inv Inventory) Remote() map[string][]RemoteEntry {
	out := map[string][]RemoteEntry{}
	for _, key := range slices.Sorted(maps.Keys(inv)) {
		cluster, ref, ok := contract.SplitRemoteRef(key)
		if !ok {
			continue
		}
		parts := strings.Split(ref, "/")
		if len(parts) != 3 || parts[0] == "" || parts[2] == "" {
			continue
		}
		out[cluster] = append(out[cluster], RemoteEntry{Kind: schema.ParseGroupKind(parts[0]), Namespace: parts[1], Name: parts[2]})
	}
	return out
}

// RemoteEntries are the inventory's entries of the named clusters, as
// they are: those of a cluster that cannot be read now are kept
// unchanged, so a cluster that does not answer or was removed never
// makes the engine forget what it put there.
func (inv Inventory) RemoteEntries(clusters map[string]bool) Inventory {
	out := Inventory{}
	for key := range inv {
		if cluster, _, ok := contract.SplitRemoteRef(key); ok && clusters[cluster] {
			out[key] = true
		}
	}
	return out
}
