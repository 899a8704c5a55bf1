package templates

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/cuengine/engine/templates/policy"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

const examples = "../examples/templates"

func mykind(spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "webapp.my.domain/v1",
		"kind":       "MyKind",
		"metadata":   map[string]any{"name": "mykind-sample", "namespace": "default", "uid": "0a1b2c3d-0000-4000-8000-000000000001"},
		"spec":       spec,
	}}
}

// loadOne loads a templates directory and returns its first template, or
// the one named by name.
func loadOne(t testing.TB, dir string, name ...string) *Template {
	t.Helper()
	set, err := Load(dir)
	require.NoError(t, err)
	require.NotEmpty(t, set.Templates())
	for _, tm := range set.Templates() {
		if len(name) == 0 || tm.Name == name[0] {
			return tm
		}
	}
	t.Fatalf("no template %v in %s", name, dir)
	return nil
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

// golden compares got with testdata/golden/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./templates -update to create it")
	assert.Equal(t, string(want), string(got))
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		dir  string
		want string
	}{
		{"syntax", "t.cue:4:16: expected '}', found 'EOF'"},
		{"nokind", `t.cue:1:21: parent.kind: must be a concrete string such as "MyKind"`},
		{"noapiversion", `t.cue:1:15: parent.apiVersion: must be a concrete string such as "webapp.my.domain/v1"`},
		{"duplicate", "b.cue:1:46: parent.kind: kind Widget.example.com/v1 is already claimed by template a.cue"},
		{"conflict", "t.cue:2:21: parent.spec.size: conflicting values int and string (mismatched types int and string) (see t.cue:3:21)"},
		{"nogroup", `t.cue:1:22: parent.apiVersion: "v1" is not group/version: a parent kind needs its own API group, as in "example.com/v1"`},
		{"badchildren", `t.cue:2:11: children: conflicting values "not a map" and {[string]:_} (mismatched types string and struct)`},
		{"clusternopolicy", "t.cue:3:81: references.token.metadata.namespace: Secret in namespace \"vault\": a cluster-scoped parent has no namespace of its own: list the namespace in policy: crossNamespace in the template to allow it\n" +
			"t.cue:4:88: children.settings.metadata.namespace: ConfigMap in namespace \"kube-system\": a cluster-scoped parent has no namespace of its own: list the namespace in policy: crossNamespace in the template to allow it"},
		{"clusterpolicy", "t.cue:4:81: references.token.metadata.namespace: Secret in namespace \"vault\", which the template's policy.crossNamespace does not list (shared)\n" +
			"t.cue:6:79: children.settings.metadata.namespace: ConfigMap in namespace \"kube-system\", which the template's policy.crossNamespace does not list (shared)\n" +
			"t.cue:8:54: children.admin.kind: ClusterRole is cluster-scoped; set policy: clusterScoped: true in the template to allow it"},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			_, err := Load(filepath.Join("testdata", "broken", tt.dir))
			require.Error(t, err)
			var le *LoadError
			require.ErrorAs(t, err, &le)
			assert.Equal(t, tt.want, err.Error())
		})
	}
}

func TestLoadMissingDirectory(t *testing.T) {
	_, err := Load("testdata/does-not-exist")
	require.ErrorContains(t, err, "reading templates directory")
}

func TestEvaluateMyKind(t *testing.T) {
	tm := loadOne(t, examples, "mykind")
	res, err := tm.Evaluate(Input{Parent: mykind(map[string]any{"deploymentName": "mykind", "foo": "bar"})})
	require.NoError(t, err)
	assert.Equal(t, []string{"spec.foo"}, res.Pruned)
	require.Len(t, res.Children, 1)
	b, err := yaml.Marshal(res.Children[0].Object.Object)
	require.NoError(t, err)
	golden(t, "mykind-deployment.yaml", b)
	assert.Equal(t, map[string]any{"readyReplicas": int64(0)}, res.Status)
	assert.Nil(t, res.Ready)

	// With the Deployment observed, status follows its readyReplicas.
	observed := map[string]any{"deployment": map[string]any{"status": map[string]any{"readyReplicas": int64(3)}}}
	res, err = tm.Evaluate(Input{Parent: mykind(map[string]any{"deploymentName": "mykind", "replicas": int64(3)}), Observed: observed})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"readyReplicas": int64(3)}, res.Status)
	replicas, _, _ := unstructured.NestedInt64(res.Children[0].Object.Object, "spec", "replicas")
	assert.Equal(t, int64(3), replicas)
}

func TestEvaluateErrors(t *testing.T) {
	mk := loadOne(t, examples, "mykind")
	widget := loadOne(t, "testdata/eval")
	w := func(spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.com/v1", "kind": "Widget",
			"metadata": map[string]any{"name": "w", "namespace": "default"}, "spec": spec,
		}}
	}
	tests := []struct {
		name   string
		tmpl   *Template
		parent *unstructured.Unstructured
		want   string
	}{
		{"negative replicas", mk, mykind(map[string]any{"deploymentName": "mykind", "replicas": int64(-1)}),
			"mykind.cue:14:26: parent.spec.replicas: invalid value -1 (out of bound >=0)"},
		{"name too long", mk, mykind(map[string]any{"deploymentName": strings.Repeat("a", 65)}),
			"mykind.cue:12:50: parent.spec.deploymentName: invalid value \"" + strings.Repeat("a", 65) + "\" (does not satisfy strings.MaxRunes(64)) (see mykind.cue:12:19, mykind.cue:12:67)"},
		{"name missing", mk, mykind(map[string]any{}),
			"mykind.cue:12:3: parent.spec.deploymentName: incomplete value strings.MinRunes(1) & strings.MaxRunes(64)"},
		{"wrong type", mk, mykind(map[string]any{"deploymentName": int64(7)}),
			"mykind.cue:12:19: parent.spec.deploymentName: conflicting values string and 7 (mismatched types string and int)"},
		{"enum", widget, w(map[string]any{"count": int64(1), "size": "huge"}),
			`widget.cue:7:11: parent.spec.size: invalid value "huge" (must be one of "large", "small") (see widget.cue:7:21)`},
		{"child without apiVersion", widget, w(map[string]any{"count": int64(1), "mode": "a"}),
			"widget.cue:22:4: children.noapiversion.apiVersion: every child needs a concrete, non-empty apiVersion"},
		{"non-concrete child", widget, w(map[string]any{"count": int64(1), "mode": "b"}),
			"widget.cue:31:13: children.notconcrete.data.n: incomplete value string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.tmpl.Evaluate(Input{Parent: tt.parent})
			require.Error(t, err)
			var te *Error
			require.ErrorAs(t, err, &te)
			assert.Equal(t, tt.want, te.Problems[0].String())
		})
	}
}

func TestEvaluateGeneric(t *testing.T) {
	tm := loadOne(t, "testdata/eval")
	parent := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "default"}, "spec": map[string]any{"count": int64(2)},
	}}
	res, err := tm.Evaluate(Input{Parent: parent})
	require.NoError(t, err)
	require.Len(t, res.Children, 1)
	assert.Equal(t, "w-config", res.Children[0].Object.GetName())
	assert.Equal(t, map[string]any{"configName": "w-config", "seen": "none"}, res.Status)
	require.NotNil(t, res.Ready)
	assert.False(t, *res.Ready)

	res, err = tm.Evaluate(Input{Parent: parent, Observed: map[string]any{"config": map[string]any{"metadata": map[string]any{"resourceVersion": "42"}}}})
	require.NoError(t, err)
	assert.Equal(t, "42", res.Status["seen"])
	assert.True(t, *res.Ready)
}

func TestCRDGolden(t *testing.T) {
	for _, dir := range []string{examples, "testdata/eval", shops} {
		set, err := Load(dir)
		require.NoError(t, err)
		for _, tm := range set.Templates() {
			b, err := yaml.Marshal(tm.CRD().Spec)
			require.NoError(t, err)
			golden(t, "crd-"+tm.Name+".yaml", b)
		}
	}
	spec := loadOne(t, examples, "mykind").CRD().Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	assert.Equal(t, []string{"deploymentName"}, spec.Required)
	assert.Equal(t, int64(64), *spec.Properties["deploymentName"].MaxLength)
	assert.Equal(t, 0.0, *spec.Properties["replicas"].Minimum)
	assert.Equal(t, "int32", spec.Properties["replicas"].Format)
	assert.JSONEq(t, "1", string(spec.Properties["replicas"].Default.Raw))
}

// TestConcurrentEvaluate evaluates one compiled template from many goroutines;
// run under -race it proves a Template is safe to share between workers.
func TestConcurrentEvaluate(t *testing.T) {
	tm := loadOne(t, examples, "mykind")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				name := fmt.Sprintf("d-%d-%d", g, i)
				res, err := tm.Evaluate(Input{Parent: mykind(map[string]any{"deploymentName": name, "replicas": int64(i)})})
				if err != nil {
					errs <- err
					return
				}
				if got := res.Children[0].Object.GetName(); got != name {
					errs <- fmt.Errorf("goroutine %d got child %q, want %q", g, got, name)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestDiscoverSkipsHiddenAndConfigMapLinks(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "..2026_01_01")
	require.NoError(t, os.Mkdir(data, 0o755))
	src, err := os.ReadFile(filepath.Join(examples, "mykind.cue"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(data, "mykind.cue"), src, 0o644))
	// The kubelet's layout: ..data -> ..<timestamp>, name -> ..data/name.
	require.NoError(t, os.Symlink("..2026_01_01", filepath.Join(dir, "..data")))
	require.NoError(t, os.Symlink(filepath.Join("..data", "mykind.cue"), filepath.Join(dir, "mykind.cue")))
	set, err := Load(dir)
	require.NoError(t, err)
	require.Len(t, set.Templates(), 1)
	assert.Equal(t, "mykind.cue", set.Templates()[0].Path)
}

func TestChildKinds(t *testing.T) {
	assert.Equal(t, "[apps/v1, Kind=Deployment]", fmt.Sprint(loadOne(t, examples, "mykind").ChildKinds()))
	assert.Equal(t, "[/v1, Kind=ConfigMap]", fmt.Sprint(loadOne(t, "testdata/eval").ChildKinds()))
}

func TestEvaluateRemembersRepeats(t *testing.T) {
	tm := loadOne(t, "testdata/eval")
	p := func(rv string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.com/v1", "kind": "Widget",
			"metadata": map[string]any{"name": "w", "namespace": "default", "resourceVersion": rv}, "spec": map[string]any{"count": int64(2)},
		}}
		return u
	}
	first, err := tm.Evaluate(Input{Parent: p("1")})
	require.NoError(t, err)
	again, answered := evaluateRemembered(t, tm, Input{Parent: p("2")}) // a status write moved only the resource version
	assert.True(t, answered)
	assert.Equal(t, first, again)
	// An observed field the template reads is a new input...
	seen, answered := evaluateRemembered(t, tm, Input{Parent: p("2"), Observed: map[string]any{"config": map[string]any{"metadata": map[string]any{"resourceVersion": "9"}}}})
	assert.False(t, answered)
	assert.Equal(t, "9", seen.Status["seen"])
	// ...and a remembered Result is the caller's own: changing it changes
	// no other.
	again.Children[0].Object.SetName("changed")
	third, answered := evaluateRemembered(t, tm, Input{Parent: p("3")})
	assert.True(t, answered)
	assert.Equal(t, first, third)
}

// evaluateRemembered evaluates in and reports whether the template's
// memory answered; the Result returned has Remembered false, to compare.
func evaluateRemembered(t *testing.T, tm *Template, in Input) (*Result, bool) {
	t.Helper()
	res, err := tm.Evaluate(in)
	require.NoError(t, err)
	remembered := res.Remembered
	res.Remembered = false
	return res, remembered
}

// TestPolicy: crossNamespace is true, false or a list of namespaces; any
// other value is an error at the policy block.
func TestPolicy(t *testing.T) {
	const head = `parent: {apiVersion: "example.com/v1", kind: "P"}` + "\n"
	for _, tt := range []struct {
		name, policy string
		want         policy.Policy
		err          string
	}{
		{"none", ``, policy.Policy{}, ""},
		{"all", `policy: {crossNamespace: true, clusterScoped: true}`, policy.Policy{CrossNamespace: policy.Namespaces{All: true}, ClusterScoped: true}, ""},
		{"listed", `policy: crossNamespace: ["shared", "monitoring"]`, policy.Policy{CrossNamespace: policy.Namespaces{Names: []string{"shared", "monitoring"}}}, ""},
		{"bad", `policy: crossNamespace: "kube-system"`, policy.Policy{}, `t.cue:2:9: policy.crossNamespace: must be true, false or a list of namespace names, not "kube-system"`},
		{"misspelt", `policy: crossNamespaces: true`, policy.Policy{}, `t.cue:2:9: policy.crossNamespaces: unknown field (the policy block has: crossNamespace, clusterScoped, clusters)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "t.cue"), []byte(head+tt.policy+"\n"), 0o644))
			set, err := Load(dir)
			if tt.err != "" {
				require.Error(t, err)
				assert.Equal(t, tt.err, err.Error())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, set.Templates()[0].Policy)
		})
	}
	listed := policy.Namespaces{Names: []string{"shared"}}
	assert.True(t, listed.Allows("shared"))
	assert.False(t, listed.Allows("kube-system"))
	assert.True(t, policy.Namespaces{All: true}.Allows("kube-system"))
	assert.False(t, policy.Namespaces{}.Any())
}
