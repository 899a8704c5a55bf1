// Command k8sschemas writes the OpenAPI v3 schemas of the built-in
// Kubernetes kinds, the ones the engine checks template children against
// offline (templates/openapi/builtin.go embeds the file it writes).
//
// The schemas are the kube-apiserver's own: the definitions openapi-gen
// generates into k8s.io/kubernetes/pkg/generated/openapi, which the apiserver
// serves at /openapi/v3, for every kind client-go's scheme registers. Only
// what a check needs is kept: types, formats, enums, properties, items,
// additionalProperties, references and the x-kubernetes- extensions that
// change what an object may hold; descriptions and defaults are dropped. The
// output is gzip-compressed JSON and the same bytes for the same modules, so
// `make verify` can compare it.
//
//	go run ./k8sschemas OUTPUT   (from hack/tools)
package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"

	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kubernetes/pkg/generated/openapi"
)

const refPrefix = "#/components/schemas/"

// file is the output: kinds by "group/version/Kind" ("v1/ConfigMap" for the
// core group) to their definition's name, and the definitions.
type file struct {
	Kinds       map[string]string        `json:"kinds"`
	Definitions map[string]*schemaSubset `json:"definitions"`
}

// schemaSubset is the part of an OpenAPI schema the engine's check reads.
type schemaSubset struct {
	Ref                  string                   `json:"$ref,omitempty"`
	Type                 []string                 `json:"type,omitempty"`
	Format               string                   `json:"format,omitempty"`
	Enum                 []any                    `json:"enum,omitempty"`
	Properties           map[string]*schemaSubset `json:"properties,omitempty"`
	AdditionalProperties *schemaSubset            `json:"additionalProperties,omitempty"`
	Items                *schemaSubset            `json:"items,omitempty"`
	AllOf                []*schemaSubset          `json:"allOf,omitempty"`
	OneOf                []*schemaSubset          `json:"oneOf,omitempty"`
	AnyOf                []*schemaSubset          `json:"anyOf,omitempty"`
	PreserveUnknown      bool                     `json:"x-kubernetes-preserve-unknown-fields,omitempty"`
	EmbeddedResource     bool                     `json:"x-kubernetes-embedded-resource,omitempty"`
	IntOrString          bool                     `json:"x-kubernetes-int-or-string,omitempty"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: k8sschemas OUTPUT")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "k8sschemas:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	defs := openapi.GetOpenAPIDefinitions(func(name string) spec.Ref {
		return spec.MustCreateRef(refPrefix + common.EscapeJsonPointer(name))
	})
	f := file{Kinds: map[string]string{}, Definitions: map[string]*schemaSubset{}}
	for gvk, typ := range scheme.Scheme.AllKnownTypes() {
		if gvk.Version == "__internal" || strings.HasSuffix(gvk.Kind, "List") {
			continue
		}
		namer, ok := reflectNew(typ).(interface{ OpenAPIModelName() string })
		if !ok {
			continue
		}
		name := namer.OpenAPIModelName()
		// Types of meta/v1 registered in every group (DeleteOptions,
		// WatchEvent, ...) are not objects anyone applies.
		if !strings.HasPrefix(name, "io.k8s.api.") {
			continue
		}
		if _, ok := defs[name]; !ok {
			continue
		}
		key := gvk.Version + "/" + gvk.Kind
		if gvk.Group != "" {
			key = gvk.Group + "/" + key
		}
		f.Kinds[key] = name
		add(f.Definitions, defs, name)
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(zw)
	// encoding/json writes map keys in order: the same modules give the
	// same bytes.
	if err := enc.Encode(f); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}

// reflectNew returns a new value of the registered type.
func reflectNew(t reflect.Type) any { return reflect.New(t).Elem().Interface() }

// add copies the definition name and every definition it refers to.
func add(out map[string]*schemaSubset, defs map[string]common.OpenAPIDefinition, name string) {
	if _, done := out[name]; done {
		return
	}
	def, ok := defs[name]
	if !ok {
		return
	}
	s := subset(&def.Schema)
	out[name] = s
	for _, ref := range refsOf(s, nil) {
		add(out, defs, ref)
	}
}

func refsOf(s *schemaSubset, acc []string) []string {
	if s == nil {
		return acc
	}
	if s.Ref != "" {
		acc = append(acc, strings.TrimPrefix(s.Ref, refPrefix))
	}
	keys := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		acc = refsOf(s.Properties[k], acc)
	}
	acc = refsOf(s.AdditionalProperties, acc)
	acc = refsOf(s.Items, acc)
	for _, group := range [][]*schemaSubset{s.AllOf, s.OneOf, s.AnyOf} {
		for _, x := range group {
			acc = refsOf(x, acc)
		}
	}
	return acc
}

func subset(s *spec.Schema) *schemaSubset {
	if s == nil {
		return nil
	}
	out := &schemaSubset{
		Ref:    s.Ref.String(),
		Type:   s.Type,
		Format: s.Format,
		Enum:   s.Enum,
	}
	if len(s.Properties) > 0 {
		out.Properties = map[string]*schemaSubset{}
		for k, p := range s.Properties {
			out.Properties[k] = subset(&p)
		}
	}
	if ap := s.AdditionalProperties; ap != nil {
		switch {
		case ap.Schema != nil:
			out.AdditionalProperties = subset(ap.Schema)
		case ap.Allows:
			out.AdditionalProperties = &schemaSubset{}
		}
	}
	if s.Items != nil && s.Items.Schema != nil {
		out.Items = subset(s.Items.Schema)
	}
	for _, x := range s.AllOf {
		out.AllOf = append(out.AllOf, subset(&x))
	}
	for _, x := range s.OneOf {
		out.OneOf = append(out.OneOf, subset(&x))
	}
	for _, x := range s.AnyOf {
		out.AnyOf = append(out.AnyOf, subset(&x))
	}
	out.PreserveUnknown = boolExt(s, "x-kubernetes-preserve-unknown-fields")
	out.EmbeddedResource = boolExt(s, "x-kubernetes-embedded-resource")
	out.IntOrString = boolExt(s, "x-kubernetes-int-or-string")
	return out
}

func boolExt(s *spec.Schema, name string) bool {
	b, ok := s.Extensions.GetBool(name)
	return ok && b
}
