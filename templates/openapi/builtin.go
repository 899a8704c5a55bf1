package openapi

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// builtinSchemasGz holds the OpenAPI schemas of the built-in kinds
// (apps/v1, v1, batch/v1, networking, rbac, policy, autoscaling, ...), as
// the kube-apiserver of the Kubernetes version in hack/tools/go.mod serves
// them. `make generate` writes it (hack/tools/k8sschemas) and `make verify`
// checks it; it is about 25 KB.
//
//go:embed builtin.json.gz
var builtinSchemasGz []byte

// builtinSchemas decodes the file: about 350 KB of JSON, 20-30 ms. It runs
// once per Load and the result is not kept: the controller loads templates
// once and then on an edit, and decoded schemas held for the process's
// life would cost about 2 MiB of live heap (twice that at the garbage
// collector's goal) to save those milliseconds at a reload.
func builtinSchemas() (map[schema.GroupVersionKind]*KindSchema, error) {
	zr, err := gzip.NewReader(bytes.NewReader(builtinSchemasGz))
	if err != nil {
		return nil, fmt.Errorf("built-in schemas: %w", err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("built-in schemas: %w", err)
	}
	var f struct {
		Kinds       map[string]string         `json:"kinds"`
		Definitions map[string]*openAPISchema `json:"definitions"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("built-in schemas: %w", err)
	}
	out := make(map[schema.GroupVersionKind]*KindSchema, len(f.Kinds))
	for key, name := range f.Kinds {
		i := strings.LastIndexByte(key, '/')
		if i < 0 {
			return nil, fmt.Errorf("built-in schemas: bad kind %q", key)
		}
		gv, err := schema.ParseGroupVersion(key[:i])
		if err != nil {
			return nil, fmt.Errorf("built-in schemas: bad kind %q: %w", key, err)
		}
		out[gv.WithKind(key[i+1:])] = &KindSchema{root: name, defs: f.Definitions, origin: "built-in"}
	}
	return out, nil
}
