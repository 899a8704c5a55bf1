package templates

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/contract"
)

func TestObservedReads(t *testing.T) {
	mk := loadOne(t, examples, "mykind")
	assert.False(t, mk.observedReads.All)
	assert.Equal(t, map[string][][]string{"deployment": {{"status", "readyReplicas"}}}, mk.observedReads.Paths)
	live := map[string]any{"deployment": map[string]any{
		"metadata": map[string]any{"name": "x", "managedFields": []any{"big"}},
		"status":   map[string]any{"readyReplicas": int64(2), "conditions": []any{"c"}},
	}, "stranger": map[string]any{"a": 1}}
	in, key := mk.observedReads.Filter(live)
	want := map[string]any{"deployment": map[string]any{"status": map[string]any{"readyReplicas": int64(2)}}}
	assert.Equal(t, want, in)
	assert.Equal(t, want, key)

	// A new Deployment: none of the fields the template reads. The
	// template is handed its empty status; the memory sees no Deployment.
	fresh := map[string]any{"deployment": map[string]any{"metadata": map[string]any{"name": "x"}, "status": map[string]any{}}}
	in, key = mk.observedReads.Filter(fresh)
	assert.Equal(t, map[string]any{"deployment": map[string]any{"status": map[string]any{}}}, in)
	assert.Nil(t, key)

	sf := loadOne(t, examples, "storefront")
	assert.False(t, sf.observedReads.All)
	// `observed.assets != _|_` reads the whole entry.
	assert.Contains(t, sf.observedReads.Paths["assets"], []string{})
}

// TestEvaluateSeesWhatItReads: the parent's metadata and status reach the
// template only where it reads them, with the same result; fields it does
// not read make no new evaluation.
func TestEvaluateSeesWhatItReads(t *testing.T) {
	dir := t.TempDir()
	writeTemplate(t, dir, "t.cue", `
parent: {apiVersion: "example.com/v1", kind: "Shop", spec: size: *1 | int}
children: "\(parent.metadata.name)-\(parent.metadata.labels.tier)": {
	apiVersion: "v1", kind: "ConfigMap"
	metadata: name: parent.metadata.name
	data: size: "\(parent.spec.size)"
}
status: seen: *parent.status.seen | 0
`)
	tm := loadOne(t, dir)
	parent := func(uid string, labels map[string]any) *unstructured.Unstructured {
		u := shop()
		u.Object["metadata"].(map[string]any)["uid"] = uid
		u.Object["metadata"].(map[string]any)["labels"] = labels
		u.Object["status"] = map[string]any{"seen": int64(3), "conditions": []any{"c"}}
		return u
	}
	first, err := tm.Evaluate(Input{Parent: parent("1", map[string]any{"tier": "web", "team": "a"})})
	require.NoError(t, err)
	require.Len(t, first.Children, 1)
	assert.Equal(t, "s-web", first.Children[0].Name)
	assert.Equal(t, map[string]any{"seen": int64(3)}, first.Status)

	// Another uid and an unread label: the same inputs, remembered.
	same, answered := evaluateRemembered(t, tm, Input{Parent: parent("2", map[string]any{"tier": "web", "team": "b"})})
	assert.True(t, answered)
	assert.Equal(t, first, same)

	other, err := tm.Evaluate(Input{Parent: parent("2", map[string]any{"tier": "db"})})
	require.NoError(t, err)
	assert.Equal(t, "s-db", other.Children[0].Name)
}

// TestEvaluateRemembersAChildWithoutWhatItReadsAsNoChild: a child that
// has appeared without the fields the template reads evaluates as no
// child, from the template's memory; an error still names the field that
// is missing where it is missing.
func TestEvaluateRemembersAChildWithoutWhatItReadsAsNoChild(t *testing.T) {
	mk := loadOne(t, examples, "mykind")
	parent := mykind(map[string]any{"deploymentName": "web"})
	none, err := mk.Evaluate(Input{Parent: parent})
	require.NoError(t, err)
	fresh, answered := evaluateRemembered(t, mk, Input{Parent: parent, Observed: map[string]any{"deployment": map[string]any{"status": map[string]any{"replicas": int64(1)}}}})
	assert.True(t, answered)
	assert.Equal(t, none, fresh)
	ready, err := mk.Evaluate(Input{Parent: parent, Observed: map[string]any{"deployment": map[string]any{"status": map[string]any{"readyReplicas": int64(1)}}}})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"readyReplicas": int64(1)}, ready.Status)

	dir := t.TempDir()
	writeTemplate(t, dir, "t.cue", `package t

parent: {apiVersion: "example.com/v1", kind: "Shop", spec: size: *1 | int}
children: cm: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "x"}
status: ready: observed.cm.status.readyReplicas
`)
	strict := loadOne(t, dir)
	_, err = strict.Evaluate(Input{Parent: shop()})
	assert.ErrorContains(t, err, "undefined field: cm")
	_, err = strict.Evaluate(Input{Parent: shop(), Observed: map[string]any{"cm": map[string]any{"status": map[string]any{}}}})
	assert.ErrorContains(t, err, "undefined field: readyReplicas")
}

// TestEvaluateReportsItsOwnPrunedFields: two parents that differ only in
// a field the schema drops give the same evaluation, each with its own
// list of pruned fields.
func TestEvaluateReportsItsOwnPrunedFields(t *testing.T) {
	tm := loadOne(t, examples, "mykind")
	withExtra, err := tm.Evaluate(Input{Parent: mykind(map[string]any{"deploymentName": "web", "extra": int64(1)})})
	require.NoError(t, err)
	assert.Equal(t, []string{"spec.extra"}, withExtra.Pruned)
	plain, err := tm.Evaluate(Input{Parent: mykind(map[string]any{"deploymentName": "web"})})
	require.NoError(t, err)
	assert.Empty(t, plain.Pruned)
	assert.Equal(t, withExtra.Children, plain.Children)
}

// TestEvaluateHidesTheEngineStatus: the status fields the engine owns
// never reach the template, even one that reads the whole status; the
// CRD declares each of them.
func TestEvaluateHidesTheEngineStatus(t *testing.T) {
	dir := t.TempDir()
	writeTemplate(t, dir, "t.cue", `
parent: {apiVersion: "example.com/v1", kind: "Shop", spec: size: *1 | int, status: seen?: int}
status: copy: parent.status
`)
	tm := loadOne(t, dir)
	u := shop()
	u.Object["status"] = map[string]any{
		"seen":                            int64(3),
		contract.StatusConditions:         []any{map[string]any{"type": contract.ConditionReady, "status": "True"}},
		contract.StatusObservedGeneration: int64(1),
		contract.StatusResources:          map[string]any{"bucket": map[string]any{"externalName": "b"}},
		contract.StatusTemplateRevision:   contract.TemplateRevisionStatus(2, "abc"),
	}
	res, err := tm.Evaluate(Input{Parent: u})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"copy": map[string]any{"seen": int64(3)}}, res.Status)
}

// TestObservedFlowsKeepWhatTheyReach: a live value that flows anywhere but
// a plain field read (a definition, a comprehension, a let, a function, an
// interpolation, an embedding) is kept whole below the path the template
// names, and the template sees it whole (issue 34).
func TestObservedFlowsKeepWhatTheyReach(t *testing.T) {
	cm := func(name string, data map[string]any) map[string]any {
		return map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": "default", "managedFields": []any{map[string]any{"manager": "kubectl"}}},
			"data":     data,
		}
	}
	live := map[string]any{
		"claims": map[string]any{"items": []any{cm("a", map[string]any{"k": "1"}), cm("b", map[string]any{"k": "2", "f": 1.0})}},
		"app":    cm("app", map[string]any{"greeting": "hello"}),
	}
	tests := []struct {
		name, src string
		paths     map[string][][]string
		status    map[string]any
	}{
		{"into a definition", `#Identity: {in: _, out: {api: in.apiVersion, name: in.metadata.name}}
status: claims: [for c in observed.claims.items {(#Identity & {in: c}).out}]`,
			map[string][][]string{"claims": {{"items"}}},
			map[string]any{"claims": []any{map[string]any{"api": "v1", "name": "a"}, map[string]any{"api": "v1", "name": "b"}}}},
		{"a comprehension's variable", `status: data: [for s in observed.claims.items {s.data}]`,
			map[string][][]string{"claims": {{"items"}}},
			map[string]any{"data": []any{map[string]any{"k": "1"}, map[string]any{"k": "2", "f": 1.0}}}},
		{"a let", "let a = observed.app\nstatus: g: a.data.greeting",
			map[string][][]string{"app": {{}}}, map[string]any{"g": "hello"}},
		{"a function", "import \"strings\"\nstatus: k: strings.Join([for k, _ in observed.app.data {k}], \",\")",
			map[string][][]string{"app": {{"data"}}}, map[string]any{"k": "greeting"}},
		{"an interpolation", `status: n: "\(observed.app.metadata.name)-x"`,
			map[string][][]string{"app": {{"metadata", "name"}}}, map[string]any{"n": "app-x"}},
		{"an embedding", "_m: {observed.app.metadata, extra: 1}\nstatus: ns: _m.namespace",
			map[string][][]string{"app": {{"metadata"}}}, map[string]any{"ns": "default"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTemplate(t, dir, "t.cue", "package t\n\n"+tc.src+"\nparent: {apiVersion: \"example.com/v1\", kind: \"Shop\", spec: size: *1 | int}\n")
			tm := loadOne(t, dir)
			assert.False(t, tm.observedReads.All)
			assert.Equal(t, tc.paths, tm.observedReads.Paths)
			res, err := tm.Evaluate(Input{Parent: shop(), Observed: live})
			require.NoError(t, err)
			assert.Equal(t, tc.status, res.Status)
			whole, err := tm.evaluate(Input{Parent: shop(), Observed: live}, everything, everything, nil)
			require.NoError(t, err)
			assert.Equal(t, whole, res)
		})
	}
}

// TestParentFlowsKeepWhatTheyReach: the parent's metadata handed to a
// definition is seen whole, as it is.
func TestParentFlowsKeepWhatTheyReach(t *testing.T) {
	dir := t.TempDir()
	writeTemplate(t, dir, "t.cue", `package t

parent: {apiVersion: "example.com/v1", kind: "Shop", spec: size: *1 | int}
#Owner: {in: _, team: *in.labels.team | "none", n: len(in.annotations)}
status: (#Owner & {in: parent.metadata}) & {in: _}
`)
	tm := loadOne(t, dir)
	assert.Equal(t, [][]string{{}}, tm.parentReads.Paths["metadata"])
	u := shop()
	u.Object["metadata"].(map[string]any)["labels"] = map[string]any{"team": "blue"}
	u.Object["metadata"].(map[string]any)["annotations"] = map[string]any{"a": "1", "b": "2"}
	res, err := tm.Evaluate(Input{Parent: u})
	require.NoError(t, err)
	assert.Equal(t, "blue", res.Status["team"])
	assert.Equal(t, int64(2), res.Status["n"])
}
