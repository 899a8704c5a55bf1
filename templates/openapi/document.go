package openapi

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// openAPISchema is the part of an OpenAPI v3 schema the check of children
// reads (templates/childschema.go): the same JSON as the apiserver's /openapi/v3, a
// CRD's openAPIV3Schema and the built-in file that hack/tools/k8sschemas
// writes, so one type reads all three.
type openAPISchema struct {
	Ref                  string                    `json:"$ref,omitempty"`
	Type                 schemaTypes               `json:"type,omitempty"`
	Format               string                    `json:"format,omitempty"`
	Enum                 []json.RawMessage         `json:"enum,omitempty"`
	Properties           map[string]*openAPISchema `json:"properties,omitempty"`
	AdditionalProperties *additionalProperties     `json:"additionalProperties,omitempty"`
	Items                *openAPISchema            `json:"items,omitempty"`
	AllOf                []*openAPISchema          `json:"allOf,omitempty"`
	OneOf                []*openAPISchema          `json:"oneOf,omitempty"`
	AnyOf                []*openAPISchema          `json:"anyOf,omitempty"`
	Nullable             bool                      `json:"nullable,omitempty"`
	Default              json.RawMessage           `json:"default,omitempty"`
	PreserveUnknown      bool                      `json:"x-kubernetes-preserve-unknown-fields,omitempty"`
	EmbeddedResource     bool                      `json:"x-kubernetes-embedded-resource,omitempty"`
	IntOrString          bool                      `json:"x-kubernetes-int-or-string,omitempty"`
	GVKs                 []struct {
		Group   string `json:"group"`
		Version string `json:"version"`
		Kind    string `json:"kind"`
	} `json:"x-kubernetes-group-version-kind,omitempty"`
}

// schemaTypes is "type": a string in CRDs, a list in openapi-gen's output.
type schemaTypes []string

func (t *schemaTypes) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*t = schemaTypes{one}
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return fmt.Errorf("type must be a string or a list of strings: %w", err)
	}
	*t = list
	return nil
}

// additionalProperties is a schema, or a bool (true: any value; false:
// none).
type additionalProperties struct {
	Schema *openAPISchema
	Allows bool
}

func (a *additionalProperties) UnmarshalJSON(b []byte) error {
	var allows bool
	if err := json.Unmarshal(b, &allows); err == nil {
		a.Allows = allows
		return nil
	}
	a.Allows = true
	return json.Unmarshal(b, &a.Schema)
}

func (a additionalProperties) MarshalJSON() ([]byte, error) {
	if a.Schema != nil {
		return json.Marshal(a.Schema)
	}
	return json.Marshal(a.Allows)
}

// KindSchema is the schema of one child kind: the name of its root in a set
// of definitions that "$ref"s point into.
type KindSchema struct {
	root string
	defs map[string]*openAPISchema
	// origin says where the schema comes from, for messages: "built-in",
	// "template mykind.cue", "CRD file crds/foo.yaml", "cluster".
	origin string
	// crd: the schema is a CRD's openAPIV3Schema, whose root need not
	// list apiVersion, kind and metadata; defs holds ObjectMeta and what
	// it refers to besides the root.
	crd bool
}

// objectMetaRef is the reference of metav1.ObjectMeta's schema in the
// built-in definitions.
const objectMetaRef = "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

// closure copies a definition and every definition it refers to, directly
// or not, from one set of definitions into another.
func closure(into, from map[string]*openAPISchema, name string) {
	if _, done := into[name]; done {
		return
	}
	s, ok := from[name]
	if !ok {
		return
	}
	into[name] = s
	var walk func(s *openAPISchema)
	walk = func(s *openAPISchema) {
		if s == nil {
			return
		}
		if s.Ref != "" {
			closure(into, from, refName(s.Ref))
		}
		for _, p := range s.Properties {
			walk(p)
		}
		if s.AdditionalProperties != nil {
			walk(s.AdditionalProperties.Schema)
		}
		walk(s.Items)
		for _, list := range [][]*openAPISchema{s.AllOf, s.OneOf, s.AnyOf} {
			for _, x := range list {
				walk(x)
			}
		}
	}
	walk(s)
}

// refName turns "#/components/schemas/io.k8s.api.core.v1.PodSpec" (or
// "#/definitions/...") into the definition's name.
func refName(ref string) string {
	ref = strings.TrimPrefix(ref, "#/components/schemas/")
	ref = strings.TrimPrefix(ref, "#/definitions/")
	return strings.ReplaceAll(strings.ReplaceAll(ref, "~1", "/"), "~0", "~")
}

// openAPIDocument is an OpenAPI v3 document as the apiserver serves one per
// group version (/openapi/v3/apis/<group>/<version>).
type openAPIDocument struct {
	Components struct {
		Schemas map[string]*openAPISchema `json:"schemas"`
	} `json:"components"`
}

// kindsOfDocument indexes a document's schemas by the kinds their
// x-kubernetes-group-version-kind names.
func kindsOfDocument(doc []byte, origin string) (map[schema.GroupVersionKind]*KindSchema, error) {
	var d openAPIDocument
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("decode OpenAPI document: %w", err)
	}
	out := map[schema.GroupVersionKind]*KindSchema{}
	for name, s := range d.Components.Schemas {
		if len(s.GVKs) != 1 {
			continue // none, or meta types registered in every group
		}
		g := s.GVKs[0]
		out[schema.GroupVersionKind{Group: g.Group, Version: g.Version, Kind: g.Kind}] = &KindSchema{root: name, defs: d.Components.Schemas, origin: origin}
	}
	return out, nil
}
