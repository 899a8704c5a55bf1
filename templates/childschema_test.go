package templates

import (
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cuengine/engine/templates/openapi"
)

// schemaParent is the parent of the cases of TestChildSchemas; the child
// starts on line 13.
const schemaParent = `parent: {
	apiVersion: "example.com/v1"
	kind:       "Shop"
	spec: {
		tier:     "gold" | "silver"
		size:     string
		replicas: *1 | int32
		port:     int
		flag:     bool
	}
}
children: c: {
`

// widgetTemplate is a second template of the directory: its kind is a child
// kind with the schema of its generated CRD.
const widgetTemplate = `parent: {
	apiVersion: "example.com/v1"
	kind:       "Widget"
	spec: size: int
}
`

func TestChildSchemas(t *testing.T) {
	deployment := `apiVersion: "apps/v1"
kind: "Deployment"
metadata: name: "shop"
`
	tests := []struct {
		name  string
		child string
		want  string // the error, "" when the child fits its schema
	}{
		{"fits", deployment + `spec: {
	replicas: parent.spec.replicas
	selector: matchLabels: app: "shop"
	template: metadata: labels: app: "shop"
	template: spec: containers: [{name: "app", image: "nginx", imagePullPolicy: "Always", ports: [{containerPort: parent.spec.port}]}]
}`, ""},
		{"unknown top-level field", `apiVersion: "v1"
kind: "ConfigMap"
metadata: name: "shop"
dta: a: "b"`, "t.cue:16:1: children.c.dta: field not allowed"},
		{"unknown field in the pod template", deployment + `spec: template: spec: restartPolicyy: "Always"`,
			"t.cue:16:23: children.c.spec.template.spec.restartPolicyy: field not allowed"},
		{"unknown field in a list item", deployment + `spec: template: spec: containers: [{name: "app", imagePullPolcy: "Always"}]`,
			"t.cue:16:50: children.c.spec.template.spec.containers.0.imagePullPolcy: field not allowed"},
		{"wrong literal type", deployment + `spec: replicas: "3"`,
			`t.cue:16:17: children.c.spec.replicas: conflicting values int32 and "3"`},
		{"wrong expression type", deployment + `spec: replicas: parent.spec.size`,
			"t.cue:16:17: children.c.spec.replicas: conflicting values int32 and string (parent.spec.size, t.cue:6:3)"},
		{"enum", deployment + `spec: template: spec: restartPolicy: "Sometimes"`,
			`t.cue:16:38: children.c.spec.template.spec.restartPolicy: invalid value "Sometimes" (must be one of "Always", "Never", "OnFailure")`},
		{"enum from the parent", deployment + `spec: template: spec: restartPolicy: parent.spec.tier`,
			`t.cue:16:38: children.c.spec.template.spec.restartPolicy: invalid value "gold" | "silver" (must be one of "Always", "Never", "OnFailure") (parent.spec.tier, t.cue:5:3)`},
		{"int-or-string, int and string", `apiVersion: "v1"
kind: "Service"
metadata: name: "shop"
spec: ports: [{port: 80, targetPort: parent.spec.port}, {port: 81, targetPort: "http"}]`, ""},
		{"int-or-string, neither", `apiVersion: "v1"
kind: "Service"
metadata: name: "shop"
spec: ports: [{port: 80, targetPort: parent.spec.flag}]`,
			"t.cue:16:38: children.c.spec.ports.0.targetPort: conflicting values int | string and bool (parent.spec.flag, t.cue:9:3)"},
		{"quantity, number and string", deployment + `spec: template: spec: containers: [{name: "app", resources: limits: {cpu: 1, memory: "64Mi"}}]`, ""},
		{"free-form maps", `apiVersion: "v1"
kind: "ConfigMap"
metadata: {name: "shop", labels: {anything: "x"}, annotations: {"example.com/note": parent.spec.size}}
data: {tier: parent.spec.tier, size: parent.spec.size}`, ""},
		{"free-form map of strings", `apiVersion: "v1"
kind: "ConfigMap"
metadata: name: "shop"
data: replicas: parent.spec.replicas`,
			"t.cue:16:17: children.c.data.replicas: conflicting values string and int (parent.spec.replicas, t.cue:7:3)"},
		{"a kind of the directory's templates", `apiVersion: "example.com/v1"
kind: "Widget"
metadata: name: "shop"
spec: size: parent.spec.size`,
			"t.cue:16:13: children.c.spec.size: conflicting values int and string (parent.spec.size, t.cue:6:3)"},
		{"a kind of a CRD file", `apiVersion: "tools.example.org/v1"
kind: "Gadget"
metadata: name: "shop"
spec: {mode: "fast", count: parent.spec.replicas, extra: {anything: [1, "two"]}, port: "http"}
spec: template: {apiVersion: "v1", kind: "Pod", metadata: name: "p", spec: {}}`, ""},
		{"a kind of a CRD file, wrong", `apiVersion: "tools.example.org/v1"
kind: "Gadget"
metadata: name: "shop"
spec: {mode: "fast", cuont: 1}`, "t.cue:16:22: children.c.spec.cuont: field not allowed"},
		{"an enum of a CRD file", `apiVersion: "tools.example.org/v1"
kind: "Gadget"
metadata: name: "shop"
spec: mode: parent.spec.tier`, `t.cue:16:13: children.c.spec.mode: invalid value "gold" | "silver" (must be one of "fast", "slow") (parent.spec.tier, t.cue:5:3)`},
		{"a kind without a schema", `apiVersion: "example.org/v1"
kind: "Unknown"
metadata: name: "shop"
spec: whatever: 1`, ""},
		{"ownership, create-only replicas and shared annotations", deployment + `spec: replicas: 3
ownership: {"spec.replicas": "CreateOnly", "metadata.annotations": "Shared", "spec.template.spec.nodeSelector": "Shared"}`, ""},
		{"ownership of a path the kind does not have", deployment + `ownership: "spec.replica": "CreateOnly"`,
			`t.cue:16:12: children.c.ownership."spec.replica": spec.replica is not a field of Deployment`},
		{"ownership of a path deep in the kind", deployment + `ownership: "spec.template.spec.nodeSelectr": "Shared"`,
			`t.cue:16:12: children.c.ownership."spec.template.spec.nodeSelectr": spec.template.spec.nodeSelectr is not a field of Deployment`},
		{"ownership of a path of a CRD's kind", `apiVersion: "tools.example.org/v1"
kind: "Gadget"
metadata: name: "shop"
spec: mode: "fast"
ownership: "spec.cuont": "CreateOnly"`, `t.cue:17:12: children.c.ownership."spec.cuont": spec.cuont is not a field of Gadget`},
		{"ownership mode unknown", deployment + `ownership: "spec.replicas": "Mine"`,
			`t.cue:16:12: children.c.ownership."spec.replicas": must be "CreateOnly" or "Shared", not "Mine"`},
		{"ownership mode not a string", deployment + `ownership: "spec.replicas": true`,
			`t.cue:16:12: children.c.ownership."spec.replicas": must be "CreateOnly" or "Shared", not true`},
		{"shared on a field that is not a map", deployment + `ownership: "spec.replicas": "Shared"`,
			`t.cue:16:12: children.c.ownership."spec.replicas": spec.replicas is not a map of Deployment: only a map (such as metadata.annotations) can be "Shared"`},
		{"shared on a struct that is not a map", deployment + `ownership: "spec.strategy": "Shared"`,
			`t.cue:16:12: children.c.ownership."spec.strategy": spec.strategy is not a map of Deployment: only a map (such as metadata.annotations) can be "Shared"`},
		{"ownership of a list item", deployment + `ownership: "spec.template.spec.containers[0].image": "CreateOnly"`,
			`t.cue:16:12: children.c.ownership."spec.template.spec.containers[0].image": names a list item: a path goes through fields only (a list is left to others whole, or not at all)`},
		{"ownership of the metadata, create-only", deployment + `ownership: "metadata.labels": "CreateOnly"`,
			`t.cue:16:12: children.c.ownership."metadata.labels": metadata is the engine's and the template's: mark metadata.labels or metadata.annotations "Shared" to keep other writers' keys`},
		{"dependsOn is the engine's", deployment + `dependsOn: ["d"]
}
children: d: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "d"`, ""},
	}
	crds, err := openapi.ReadCRDs(filepath.Join("testdata", "childschema", "crds"))
	require.NoError(t, err)
	require.Len(t, crds, 1)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "t.cue"), []byte(schemaParent+indent(tt.child)+"\n}\n"))
			writeFile(t, filepath.Join(dir, "widget.cue"), []byte(widgetTemplate))
			set, err := LoadWith(dir, LoadOptions{CRDs: crds})
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			var le *LoadError
			require.ErrorAs(t, err, &le)
			assert.Equal(t, tt.want, err.Error())
			assert.Nil(t, set)
		})
	}
}

func indent(s string) string { return strings.TrimSuffix(s, "\n") }

func TestChildSchemasUnchecked(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "t.cue"), []byte(schemaParent+`apiVersion: "example.org/v1"
kind: "Unknown"
metadata: name: "shop"
}
children: d: {apiVersion: "example.org/v1", kind: "Unknown", metadata: name: "other"}
`))
	set, err := Load(dir)
	require.NoError(t, err)
	want := []Unchecked{{Template: "t.cue", Child: "c", Kind: schema.GroupVersionKind{Group: "example.org", Version: "v1", Kind: "Unknown"}}}
	assert.Equal(t, want, set.Unchecked(), "reported once per kind")
	assert.Equal(t, "t.cue: children.c: kind Unknown.example.org/v1 has no schema; its children are not checked (engine vet --crds DIR adds CRDs)", want[0].String())
}

// TestChildSchemasExamples: every template of the repository fits its
// children's schemas, with no kind left unchecked.
func TestChildSchemasExamples(t *testing.T) {
	for _, dir := range []string{examples, "../testdata/unit", "../engine/testdata/templates", "../render/testdata", "testdata/eval"} {
		t.Run(dir, func(t *testing.T) {
			set, err := Load(dir)
			require.NoError(t, err)
			assert.Empty(t, set.Unchecked())
		})
	}
}

// TestChildSchemasBehindObserved: a child that appears only once something
// exists (if observed.x != _|_) is checked too, and one that appears only
// while it does not.
func TestChildSchemasBehindObserved(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "t.cue"), []byte(`package t

parent: {apiVersion: "example.com/v1", kind: "Shop"}
children: config: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "config"}
if observed.config != _|_ {
	children: app: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "app", data: version: observed.config.data.version, dta: 1}
}
if observed.config == _|_ {
	children: waiting: {apiVersion: "v1", kind: "ConfigMap", metadata: nme: "waiting"}
}
`))
	_, err := Load(dir)
	require.Error(t, err)
	assert.Equal(t, "t.cue:6:123: children.app.dta: field not allowed\nt.cue:9:69: children.waiting.metadata.nme: field not allowed", err.Error())
}

func TestReadCRDsErrors(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "bad.yaml"), []byte("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n---\nspec: [unclosed\n"))
	_, err := openapi.ReadCRDs(dir)
	require.Error(t, err)
	assert.Equal(t, filepath.Join(dir, "bad.yaml")+": document 2: error converting YAML to JSON: yaml: line 1: did not find expected ',' or ']'", err.Error())
}

// TestChildSchemasConcurrentLoads: loads in parallel share the built-in
// schemas and their CUE texts (run under -race).
func TestChildSchemasConcurrentLoads(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			_, err := Load(examples)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// schemaSourceFunc is a SchemaSource for unit tests.
type schemaSourceFunc func(gv schema.GroupVersion) ([]byte, error)

func (f schemaSourceFunc) OpenAPIV3(gv schema.GroupVersion) ([]byte, error) { return f(gv) }

// A kind only the cluster knows is checked against the cluster's document;
// a cluster that does not answer leaves it unchecked, with the reason, and
// refuses nothing.
func TestChildSchemasFromTheCluster(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "t.cue"), []byte(schemaParent+`apiVersion: "gizmo.example.org/v1"
kind: "Gizmo"
metadata: name: "g"
spec: colr: "red"
}
`))
	doc := `{"components": {"schemas": {"org.example.gizmo.v1.Gizmo": {
		"type": "object",
		"x-kubernetes-group-version-kind": [{"group": "gizmo.example.org", "version": "v1", "kind": "Gizmo"}],
		"properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
			"spec": {"type": "object", "properties": {"color": {"type": "string"}}}}}}}}`
	asked := 0
	_, err := LoadWith(dir, LoadOptions{Cluster: schemaSourceFunc(func(gv schema.GroupVersion) ([]byte, error) {
		asked++
		assert.Equal(t, schema.GroupVersion{Group: "gizmo.example.org", Version: "v1"}, gv)
		return []byte(doc), nil
	})})
	require.Error(t, err)
	assert.Equal(t, "t.cue:16:7: children.c.spec.colr: field not allowed", err.Error())
	assert.Equal(t, 1, asked, "once per Load")

	set, err := LoadWith(dir, LoadOptions{Cluster: schemaSourceFunc(func(schema.GroupVersion) ([]byte, error) {
		return nil, errors.New("connection refused")
	})})
	require.NoError(t, err)
	require.Len(t, set.Unchecked(), 1)
	assert.Equal(t, "t.cue: children.c: kind Gizmo.gizmo.example.org/v1 is not checked: the cluster's schema: connection refused", set.Unchecked()[0].String())
}

// nullCases are children with nulls, and whether the apiserver takes them
// (TestChildSchemasNull; TestNullsOnTheAPIServer asks a real one): a null
// field or map value is the zero value of a built-in kind's field; a CRD
// refuses a null field, map value or list item unless the schema says
// nullable or (for a field) has a default, which replaces it. The first is
// Kubernetes' documentation example network-policy-default-deny-ingress.yaml
// (kubernetes/website, content/en/examples/service/networking/, CC BY 4.0)
// with podSelector's matchLabels null.
var nullCases = []struct {
	name  string
	child string
	want  string // vet's error, "" when the child fits its schema
}{
	{"NetworkPolicy, null matchLabels", `apiVersion: "networking.k8s.io/v1"
kind: "NetworkPolicy"
metadata: name: "default-deny-ingress"
spec: {
	podSelector: matchLabels: null
	policyTypes: ["Ingress"]
}`, ""},
	{"NetworkPolicy, null fields of every type", `apiVersion: "networking.k8s.io/v1"
kind: "NetworkPolicy"
metadata: {name: "default-deny-ingress", labels: null, annotations: a: null}
spec: {
	podSelector: {matchLabels: null, matchExpressions: null}
	policyTypes: null
	ingress: [{from: null, ports: [{port: null, protocol: null, endPort: null}]}]
}`, ""},
	{"NetworkPolicy, a null item of a list", `apiVersion: "networking.k8s.io/v1"
kind: "NetworkPolicy"
metadata: name: "default-deny-ingress"
spec: {
	podSelector: {}
	policyTypes: [null]
}`, `t.cue:18:16: children.c.spec.policyTypes.0: invalid value null (must be one of "Egress", "Ingress")`},
	{"NetworkPolicy, a null and a wrong field", `apiVersion: "networking.k8s.io/v1"
kind: "NetworkPolicy"
metadata: name: "default-deny-ingress"
spec: {
	podSelector: matchLabels: null
	policyTyps: ["Ingress"]
}`, "t.cue:18:15: children.c.spec.policyTyps.0: field not allowed"},
	{"CRD, a null field not nullable", `apiVersion: "tools.example.org/v1"
kind: "Knob"
metadata: name: "k"
spec: selector: null`, "t.cue:16:17: children.c.spec.selector: conflicting values {[string]:string} and null"},
	{"CRD, a null list not nullable", `apiVersion: "tools.example.org/v1"
kind: "Knob"
metadata: name: "k"
spec: nullableTags: null`, "t.cue:16:21: children.c.spec.nullableTags: conflicting values [...(null|string)] and null"},
	{"CRD, a null field with a default", `apiVersion: "tools.example.org/v1"
kind: "Knob"
metadata: name: "k"
spec: size: null`, ""},
	{"CRD, null field nullable", `apiVersion: "tools.example.org/v1"
kind: "Knob"
metadata: name: "k"
spec: nullableSelector: null`, ""},
	{"CRD, a null value of a map", `apiVersion: "tools.example.org/v1"
kind: "Knob"
metadata: name: "k"
spec: selector: {a: "b", c: null}`, "t.cue:16:29: children.c.spec.selector.c: conflicting values string and null"},
	{"CRD, a null item, nullable", `apiVersion: "tools.example.org/v1"
kind: "Knob"
metadata: name: "k"
spec: nullableTags: ["a", null]`, ""},
	{"CRD, a null item, not nullable", `apiVersion: "tools.example.org/v1"
kind: "Knob"
metadata: name: "k"
spec: tags: ["a", null]`, "t.cue:16:19: children.c.spec.tags.1: conflicting values string and null"},
}

const nullCRDs = "testdata/childschema/nulls"

func TestChildSchemasNull(t *testing.T) {
	crds, err := openapi.ReadCRDs(nullCRDs)
	require.NoError(t, err)
	for _, tt := range nullCases {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "t.cue"), []byte(schemaParent+indent(tt.child)+"\n}\n"))
			_, err := LoadWith(dir, LoadOptions{CRDs: crds})
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Equal(t, tt.want, err.Error())
		})
	}
}

// crdRootCases: a CRD's object has apiVersion, kind and metadata (an
// ObjectMeta) whether its schema lists them or not, as the apiserver has
// them.
var crdRootCases = []struct {
	name, child, want string
}{
	{"only spec in the schema", `apiVersion: "tools.example.org/v1"
kind: "Wheel"
metadata: {name: "w", namespace: "default", labels: app: "w", annotations: note: "x", ownerReferences: [{apiVersion: "v1", kind: "ConfigMap", name: "c", uid: "u"}]}
spec: anything: [1, "two"]`, ""},
	{"metadata is an ObjectMeta", `apiVersion: "tools.example.org/v1"
kind: "Wheel"
metadata: {name: "w", lables: app: "w"}`, "t.cue:15:23: children.c.metadata.lables: field not allowed"},
	{"metadata declared as an object", `apiVersion: "tools.example.org/v1"
kind: "Knob"
metadata: {name: "k", generation: "one"}`, `t.cue:15:35: children.c.metadata.generation: conflicting values int64 and "one"`},
	{"other fields stay closed", `apiVersion: "tools.example.org/v1"
kind: "Wheel"
metadata: name: "w"
status: ok: true`, "t.cue:16:1: children.c.status: field not allowed"},
}

func TestChildSchemasCRDRoot(t *testing.T) {
	crds, err := openapi.ReadCRDs(nullCRDs)
	require.NoError(t, err)
	for _, tt := range crdRootCases {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "t.cue"), []byte(schemaParent+indent(tt.child)+"\n}\n"))
			_, err := LoadWith(dir, LoadOptions{CRDs: crds})
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Equal(t, tt.want, err.Error())
		})
	}
}
