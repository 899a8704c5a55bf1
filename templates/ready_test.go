package templates

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// readyHead is the parent of the readiness tests' templates.
const readyHead = `package t

parent: {
	apiVersion: "example.com/v1"
	kind:       "Shop"
	spec: replicas: *1 | int
}
`

func readyParent() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Shop",
		"metadata": map[string]any{"name": "s", "namespace": "ns", "uid": "u", "generation": int64(1)},
		"spec":     map[string]any{"replicas": int64(1)},
	}}
}

// TestReadyWhen: a child's readyWhen is the engine's: not applied, a bool
// or a list of bools, and while what it reads does not exist it is not
// ready, never an evaluation error.
func TestReadyWhen(t *testing.T) {
	const deploy = `
children: deployment: {
	apiVersion: "apps/v1"
	kind:       "Deployment"
	metadata: name: "web"
	spec: replicas: parent.spec.replicas
	readyWhen: %s
}
children: svc: {apiVersion: "v1", kind: "Service", metadata: name: "web", dependsOn: ["deployment"]}
`
	tests := []struct {
		name      string
		readyWhen string
		observed  map[string]any
		want      ChildReadiness
	}{
		{"true", `(*observed.deployment.status.readyReplicas | 0) >= 1`, map[string]any{"deployment": map[string]any{"status": map[string]any{"readyReplicas": int64(1)}}}, ChildReadiness{Ready: true}},
		{"false", `(*observed.deployment.status.readyReplicas | 0) >= 1`, map[string]any{"deployment": map[string]any{"status": map[string]any{}}}, ChildReadiness{}},
		{"not there yet", `observed.deployment.status.readyReplicas >= 1`, nil, ChildReadiness{Unknown: `undefined field: deployment`}},
		{"a list, all true", `[observed.deployment.status.readyReplicas >= 1, observed.deployment.status.updatedReplicas >= 1]`,
			map[string]any{"deployment": map[string]any{"status": map[string]any{"readyReplicas": int64(1), "updatedReplicas": int64(1)}}}, ChildReadiness{Ready: true}},
		{"a list, one false", `[observed.deployment.status.readyReplicas >= 1, observed.deployment.status.updatedReplicas >= 1]`,
			map[string]any{"deployment": map[string]any{"status": map[string]any{"readyReplicas": int64(1), "updatedReplicas": int64(0)}}}, ChildReadiness{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTemplate(t, dir, "t.cue", readyHead+fmt.Sprintf(deploy, tc.readyWhen))
			tm := loadOne(t, dir)
			res, err := tm.Evaluate(Input{Parent: readyParent(), Observed: tc.observed})
			require.NoError(t, err)
			require.Len(t, res.Children, 2)
			d := res.Children[0]
			require.NotNil(t, d.ReadyWhen)
			got := *d.ReadyWhen
			if tc.want.Unknown != "" {
				assert.Contains(t, got.Unknown, tc.want.Unknown)
				got.Unknown = tc.want.Unknown
			}
			assert.Equal(t, tc.want, got)
			assert.NotContains(t, d.Object.Object, "readyWhen", "the engine's, not applied")
			assert.Equal(t, map[string]any{"replicas": int64(1)}, d.Object.Object["spec"])
			assert.Nil(t, res.Children[1].ReadyWhen, "no readyWhen, no verdict")
			assert.Equal(t, []string{"deployment"}, res.Children[1].DependsOn)

			again, err := tm.Evaluate(Input{Parent: readyParent(), Observed: tc.observed})
			require.NoError(t, err)
			assert.True(t, again.Remembered)
			assert.Equal(t, res.Children[0].ReadyWhen, again.Children[0].ReadyWhen, "the memory keeps it")
		})
	}
}

func TestReadyWhenWrongKind(t *testing.T) {
	dir := t.TempDir()
	writeTemplate(t, dir, "t.cue", readyHead+`
children: deployment: {apiVersion: "apps/v1", kind: "Deployment", metadata: name: "web", readyWhen: "yes"}
`)
	tm := loadOne(t, dir)
	_, err := tm.Evaluate(Input{Parent: readyParent()})
	require.Error(t, err)
	assert.Equal(t, `t/t.cue:9:90: children.deployment.readyWhen: must be a bool or a list of bools, not string`, err.Error())
}

// TestReadyStruct: ready may carry a reason and a message for the
// parent's Ready condition.
func TestReadyStruct(t *testing.T) {
	dir := t.TempDir()
	writeTemplate(t, dir, "t.cue", readyHead+`
_members: *observed.db.status.members | 0
ready: {
	ok: _members >= 3
	if !ok {
		reason:  "NoQuorum"
		message: "\(_members) of 3 members are up"
	}
}
children: db: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "db"}
`)
	tm := loadOne(t, dir)
	res, err := tm.Evaluate(Input{Parent: readyParent(), Observed: map[string]any{"db": map[string]any{"status": map[string]any{"members": int64(2)}}}})
	require.NoError(t, err)
	require.NotNil(t, res.Ready)
	assert.False(t, *res.Ready)
	assert.Equal(t, "NoQuorum", res.ReadyReason)
	assert.Equal(t, "2 of 3 members are up", res.ReadyMessage)

	res, err = tm.Evaluate(Input{Parent: readyParent(), Observed: map[string]any{"db": map[string]any{"status": map[string]any{"members": int64(3)}}}})
	require.NoError(t, err)
	assert.True(t, *res.Ready)
	assert.Empty(t, res.ReadyReason)
}

// TestReadyRefused: vet refuses, at its line, a ready that is neither form.
func TestReadyRefused(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"a string", `ready: "yes"`, `t/t.cue:9:1: ready: must be a bool, or {ok: bool, reason?: string, message?: string}, not string`},
		{"an unknown field", `ready: {ok: true, reson: "X"}`, `t/t.cue:9:19: ready.reson: is not a field of ready (known: ok, reason, message)`},
		{"no ok", `ready: {reason: "X"}`, `t/t.cue:9:1: ready.ok: is missing: ready must be a bool, or {ok: bool, reason?: string, message?: string}`},
		{"a bad reason", `ready: {ok: false, reason: "no quorum"}`, `t/t.cue:9:20: ready.reason: "no quorum" is not a condition reason: a CamelCase word such as "NoQuorum"`},
		{"ok not a bool", `ready: {ok: "false"}`, `t/t.cue:9:9: ready.ok: must be a bool, not string`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTemplate(t, dir, "t.cue", readyHead+"\n"+tc.body+"\n")
			_, err := Load(dir)
			require.Error(t, err)
			assert.Equal(t, tc.want, err.Error())
		})
	}
}
