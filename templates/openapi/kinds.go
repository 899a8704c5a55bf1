package openapi

import (
	"encoding/json"
	"fmt"
	"maps"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// SchemaSource serves OpenAPI v3 documents, one per group version, as the
// apiserver does at /openapi/v3/apis/<group>/<version>.
type SchemaSource interface {
	// OpenAPIV3 returns the document of gv, or nil when the source has none.
	OpenAPIV3(gv schema.GroupVersion) ([]byte, error)
}

// CUE writes the kind's schema as CUE: a definition #kind a child is
// unified with (cue.go).
func (ks *KindSchema) CUE() string { return cueOfKind(ks) }

// Origin says where the schema comes from, for messages: "built-in",
// "template mykind.cue", "CRD file crds/foo.yaml", "cluster".
func (ks *KindSchema) Origin() string { return ks.origin }

// CRD reports whether the schema is a CRD's openAPIV3Schema.
func (ks *KindSchema) CRD() bool { return ks.crd }

// Kinds finds the schema of each kind, once per Load: the built-in kinds,
// then the CRDs added (the set's own kinds and those given), then the
// cluster. It is not safe for concurrent use.
type Kinds struct {
	builtin map[schema.GroupVersionKind]*KindSchema
	own     map[schema.GroupVersionKind]*KindSchema
	cluster SchemaSource
	fetched map[schema.GroupVersion]map[schema.GroupVersionKind]*KindSchema
	// scopes are the scopes of the CRDs added.
	scopes map[schema.GroupKind]apiextensionsv1.ResourceScope
	// meta holds the definitions of ObjectMeta, which every CRD's metadata is.
	meta map[string]*openAPISchema
}

// NewKinds returns the built-in kinds, and asks cluster, when not nil, for
// the kinds nobody else knows.
func NewKinds(cluster SchemaSource) (*Kinds, error) {
	k := &Kinds{own: map[schema.GroupVersionKind]*KindSchema{}, cluster: cluster,
		fetched: map[schema.GroupVersion]map[schema.GroupVersionKind]*KindSchema{},
		scopes:  map[schema.GroupKind]apiextensionsv1.ResourceScope{}, meta: map[string]*openAPISchema{}}
	var err error
	if k.builtin, err = builtinSchemas(); err != nil {
		return nil, err
	}
	// Every CRD's metadata is an ObjectMeta: one copy of its definitions.
	for _, ks := range k.builtin {
		closure(k.meta, ks.defs, refName(objectMetaRef))
		break // the built-in kinds share their definitions
	}
	return k, nil
}

// AddCRD indexes every served version of a CRD, and its scope; origin
// names it in messages.
func (k *Kinds) AddCRD(crd *apiextensionsv1.CustomResourceDefinition, origin string) error {
	for _, v := range crd.Spec.Versions {
		gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
		defs := maps.Clone(k.meta)
		defs["root"] = &openAPISchema{PreserveUnknown: true}
		ks := &KindSchema{root: "root", defs: defs, origin: origin, crd: true}
		if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
			raw, err := json.Marshal(v.Schema.OpenAPIV3Schema)
			if err != nil {
				return fmt.Errorf("%s: %w", origin, err)
			}
			var s openAPISchema
			if err := json.Unmarshal(raw, &s); err != nil {
				return fmt.Errorf("%s: %w", origin, err)
			}
			defs["root"] = &s
		}
		k.own[gvk] = ks
	}
	k.scopes[schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}] = crd.Spec.Scope
	return nil
}

// Lookup returns the kind's schema, or nil when nobody has one. Its error
// is the cluster's: a failed discovery leaves the kind unchecked, it never
// refuses a template (nor makes a reload wait for the apiserver).
func (k *Kinds) Lookup(gvk schema.GroupVersionKind) (*KindSchema, error) {
	if ks, ok := k.own[gvk]; ok {
		return ks, nil
	}
	if ks, ok := k.builtin[gvk]; ok {
		return ks, nil
	}
	if k.cluster == nil {
		return nil, nil
	}
	gv := gvk.GroupVersion()
	kinds, ok := k.fetched[gv]
	if !ok {
		doc, err := k.cluster.OpenAPIV3(gv)
		if err == nil && doc != nil {
			kinds, err = kindsOfDocument(doc, "cluster")
		}
		k.fetched[gv] = kinds // an error too: asked once per Load
		if err != nil {
			return nil, fmt.Errorf("the cluster's schema: %w", err)
		}
	}
	return kinds[gvk], nil
}

// Namespaced reports whether the kind is namespaced, and whether its scope
// is known here at all: a CRD added, or a built-in kind.
func (k *Kinds) Namespaced(gvk schema.GroupVersionKind) (namespaced, known bool) {
	if scope, ok := k.scopes[gvk.GroupKind()]; ok {
		return scope == apiextensionsv1.NamespaceScoped, true
	}
	if _, ok := k.builtin[gvk]; ok || clusterScopedBuiltins[gvk.GroupKind()] {
		return !clusterScopedBuiltins[gvk.GroupKind()], true
	}
	return false, false
}

// BuiltinClusterScoped reports whether a built-in kind is cluster-scoped.
// Every other built-in kind is namespaced.
func BuiltinClusterScoped(gk schema.GroupKind) bool { return clusterScopedBuiltins[gk] }

var clusterScopedBuiltins = map[schema.GroupKind]bool{
	{Kind: "Namespace"}:        true,
	{Kind: "Node"}:             true,
	{Kind: "PersistentVolume"}: true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                       true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                true,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:               true,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                 true,
	{Group: "storage.k8s.io", Kind: "CSIDriver"}:                                    true,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                             true,
	{Group: "networking.k8s.io", Kind: "IngressClass"}:                              true,
	{Group: "node.k8s.io", Kind: "RuntimeClass"}:                                    true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}: true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:   true,
	{Group: "apiregistration.k8s.io", Kind: "APIService"}:                           true,
}
