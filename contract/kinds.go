package contract

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// KindString names a kind in full, Kind.group/version:
// "MyKind.webapp.my.domain/v1" ("ConfigMap.v1" in the core group). It is
// the format of AnnotationTemplateKind, and how logs, metrics, events and
// the engine's reports name a kind.
func KindString(gvk schema.GroupVersionKind) string {
	return gvk.Kind + "." + gvk.GroupVersion().String()
}

// ParseKindString reads a kind in KindString's format; ok is false when s
// is not in it.
func ParseKindString(s string) (gvk schema.GroupVersionKind, ok bool) {
	kindGroup, version, grouped := strings.Cut(s, "/")
	if !grouped {
		// The core group: Kind.version.
		kind, version, _ := strings.Cut(s, ".")
		if kind == "" || version == "" {
			return schema.GroupVersionKind{}, false
		}
		return schema.GroupVersionKind{Version: version, Kind: kind}, true
	}
	kind, group, _ := strings.Cut(kindGroup, ".")
	if kind == "" || group == "" || version == "" || strings.Contains(version, "/") {
		return schema.GroupVersionKind{}, false
	}
	return schema.GroupVersionKind{Group: group, Version: version, Kind: kind}, true
}

// TemplateKindLabel is the value of LabelTemplateKind for a kind:
// "mykind.webapp.my.domain", or a digest of it when it is longer than a
// label value may be. It is also the prefix of the names of the kind's
// revisions (revisions.RevisionName).
func TemplateKindLabel(gk schema.GroupKind) string {
	v := strings.ToLower(gk.Kind + "." + gk.Group)
	if len(v) > 63 {
		sum := sha256.Sum256([]byte(v))
		v = strings.TrimRight(v[:50], ".-") + "-" + hex.EncodeToString(sum[:])[:12]
	}
	return v
}

// ObjectRef names an object across kinds and namespaces,
// Kind.group/namespace/name: "MyKind.webapp.my.domain/default/web1" (the
// namespace is empty for a cluster-scoped object). It is the format of
// AnnotationParent and of the entries of AnnotationInventory.
func ObjectRef(gk schema.GroupKind, namespace, name string) string {
	return gk.String() + "/" + namespace + "/" + name
}

// RemoteRef names a child in a registered workload cluster in a parent's
// AnnotationInventory: the cluster's name and the child's ObjectRef.
func RemoteRef(cluster string, gk schema.GroupKind, namespace, name string) string {
	return cluster + ":" + ObjectRef(gk, namespace, name)
}

// SplitRemoteRef returns the cluster of an inventory entry and its
// ObjectRef; ok is false for an entry of the engine's own cluster.
func SplitRemoteRef(entry string) (cluster, ref string, ok bool) {
	return strings.Cut(entry, ":")
}

// ParentRef names a parent in the AnnotationParent format (ObjectRef).
func ParentRef(parent *unstructured.Unstructured) string {
	return ObjectRef(parent.GroupVersionKind().GroupKind(), parent.GetNamespace(), parent.GetName())
}
