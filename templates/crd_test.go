package templates

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const shops = "testdata/crd"

// schemaJSON is a schema in JSON, to compare whole.
func schemaJSON(t *testing.T, s apiextensionsv1.JSONSchemaProps) string {
	t.Helper()
	b, err := json.Marshal(s)
	require.NoError(t, err)
	return string(b)
}

// TestStatusSchemaCoversConditionalFields: the status fields the template
// sets under an `if`, in a comprehension or as optional fields are in the
// CRD, typed when their expression says the type and kept whatever they
// hold otherwise, so the apiserver stores them.
func TestStatusSchemaCoversConditionalFields(t *testing.T) {
	tm := loadOne(t, shops)
	status := tm.CRD().Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"]
	keep := `{"x-kubernetes-preserve-unknown-fields":true}`
	for name, want := range map[string]string{
		"availableReplicas": keep, // observed: any type
		"labelCount":        `{"type":"integer"}`,
		"memory":            keep, // of a struct whose default has no memory
		"config":            `{"type":"object","properties":{"name":` + keep + `,"seen":{"type":"boolean"}}}`,
		"ports":             `{"type":"object","x-kubernetes-preserve-unknown-fields":true}`, // names computed from data
		"argList":           `{"type":"array","items":` + keep + `}`,
		"note":              `{"type":"string"}`,
	} {
		require.Contains(t, status.Properties, name)
		assert.JSONEq(t, want, schemaJSON(t, status.Properties[name]), name)
	}

	stored := map[string]any{
		"availableReplicas": int64(3), "labelCount": int64(1), "memory": "1Gi",
		"config": map[string]any{"name": "s", "seen": true}, "ports": map[string]any{"port0": int64(80)},
		"argList": []any{"a"}, "note": "n",
	}
	obj := map[string]any{"apiVersion": "example.com/v1", "kind": "Shop", "metadata": map[string]any{"name": "s"}, "status": stored}
	assert.Empty(t, prune(obj, tm.schema), "the apiserver drops none of them")
}

// TestStatusSchemaOpenWhereSyntaxCannotTell: a status field named by data
// at the top of status, or status given by a reference the syntax cannot
// look into, keeps every field.
func TestStatusSchemaOpenWhereSyntaxCannotTell(t *testing.T) {
	for name, src := range map[string]string{
		"computed name": `for k, v in parent.spec.labels {status: "label-\(k)": v}`,
		"reference":     "_s: {if parent.spec.labels.a != _|_ {a: 1}}\nstatus: _s",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeShop(t, dir, `parent: {apiVersion: "example.com/v1", kind: "Shop", spec: labels: {[string]: string}}`+"\n"+src+"\n")
			status := loadOne(t, dir).CRD().Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"]
			require.NotNil(t, status.XPreserveUnknownFields)
			assert.True(t, *status.XPreserveUnknownFields)
		})
	}
}

// TestDefaultsOfMapsListsAndStructs: a map, list or struct with a default
// has the schema of what it accepts, with the default as the CRD's.
func TestDefaultsOfMapsListsAndStructs(t *testing.T) {
	tm := loadOne(t, shops)
	spec := tm.CRD().Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	assert.JSONEq(t, `{"type":"object","description":"Labels go on the ConfigMap; a user's labels replace the default.",
		"additionalProperties":{"type":"string"},"default":{"app":"shop"}}`, schemaJSON(t, spec.Properties["labels"]))
	assert.JSONEq(t, `{"type":"array","items":{"type":"string"},"default":["a","b"]}`, schemaJSON(t, spec.Properties["args"]))
	assert.JSONEq(t, `{"type":"object","properties":{"cpu":{"type":"string"},"memory":{"type":"string"}},"required":["cpu"],"default":{"cpu":"1"}}`,
		schemaJSON(t, spec.Properties["size"]))

	shop := func(spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Shop",
			"metadata": map[string]any{"name": "s", "namespace": "default"}, "spec": spec}}
	}
	stored, pruned, err := tm.Admit(shop(map[string]any{
		"labels": map[string]any{"team": "a"}, "args": []any{"c"}, "size": map[string]any{"cpu": "2", "memory": "1Gi"}, "ports": []any{},
	}))
	require.NoError(t, err)
	assert.Empty(t, pruned)
	assert.Equal(t, map[string]any{"labels": map[string]any{"team": "a"}, "args": []any{"c"}, "size": map[string]any{"cpu": "2", "memory": "1Gi"}, "ports": []any{}},
		stored.Object["spec"], "the user's values kept")

	stored, _, err = tm.Admit(shop(map[string]any{"ports": []any{}}))
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"labels": map[string]any{"app": "shop"}, "args": []any{"a", "b"}, "size": map[string]any{"cpu": "1"}, "ports": []any{}},
		stored.Object["spec"], "the defaults applied")
}

// TestDefaultRefusedByTheAPIServer: a default the apiserver would refuse in
// the CRD is the template's error at the field.
func TestDefaultRefusedByTheAPIServer(t *testing.T) {
	dir := t.TempDir()
	writeShop(t, dir, `parent: {apiVersion: "example.com/v1", kind: "Shop", spec: {
	size: *{cpu: "1", extra: 2} | {cpu: string, extra?: int & <=1}
}}
`)
	_, err := Load(dir)
	require.Error(t, err)
	assert.Equal(t, "t.cue:2:2: parent.spec.size: the apiserver refuses this default in the CRD: "+
		"Invalid value: 2: extra in body should be less than or equal to 1", err.Error())
}

// writeShop writes a one-file template into dir.
func writeShop(t *testing.T, dir, src string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "t.cue"), []byte(src), 0o644))
}
