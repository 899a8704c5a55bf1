package templates

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestReferenceErrors: a reference that cannot be read, or a local name
// declared twice, is a compile error at the user's own line.
func TestReferenceErrors(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string
	}{
		{
			name: "a child and a reference of one name",
			body: `
children: settings: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "s"}
references: settings: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "s"}
`,
			want: `t/t.cue:9:13: references.settings: local name "settings" is also children.settings (t/t.cue:8:11): a local name is a child, a resource or a reference, never two`,
		},
		{
			name: "a resource and a reference of one name",
			body: `
resources: settings: provider: "gcs"
references: settings: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "s"}
`,
			want: `t/t.cue:9:13: references.settings: local name "settings" is also resources.settings (t/t.cue:8:12): a local name is a child, a resource or a reference, never two`,
		},
		{
			name: "a child and a resource of one name",
			body: `
children: bucket: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "s"}
resources: bucket: provider: "gcs"
`,
			want: `t/t.cue:9:12: resources.bucket: local name "bucket" is also children.bucket (t/t.cue:8:11): a local name is a child, a resource or a reference, never two`,
		},
		{
			name: "no apiVersion",
			body: `
references: settings: {kind: "ConfigMap", metadata: name: "s"}
`,
			want: `t/t.cue:8:24: references.settings.apiVersion: every reference needs a concrete apiVersion, known without the parent, such as "v1"`,
		},
		{
			name: "no kind",
			body: `
references: settings: {apiVersion: "v1", metadata: name: "s"}
`,
			want: `t/t.cue:8:24: references.settings.kind: every reference needs a concrete kind, known without the parent, such as "ConfigMap"`,
		},
		{
			name: "a kind from the parent",
			body: `
parent: spec: kind: string
references: settings: {apiVersion: "v1", kind: parent.spec.kind, metadata: name: "s"}
`,
			want: `t/t.cue:9:42: references.settings.kind: every reference needs a concrete kind, known without the parent, such as "ConfigMap"`,
		},
		{
			name: "neither a name nor a selector",
			body: `
references: settings: {apiVersion: "v1", kind: "ConfigMap", metadata: namespace: "shared"}
`,
			want: `t/t.cue:8:24: references.settings: every reference needs metadata.name (one object) or selector.matchLabels (a list of objects)`,
		},
		{
			name: "an empty name",
			body: `
references: settings: {apiVersion: "v1", kind: "ConfigMap", metadata: name: ""}
`,
			want: `t/t.cue:8:71: references.settings.metadata.name: every reference by name needs a concrete, non-empty metadata.name`,
		},
		{
			name: "a name and a selector",
			body: `
references: settings: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "s", selector: matchLabels: team: "a"}
`,
			want: `t/t.cue:8:82: references.settings.selector: a reference has metadata.name (one object) or a selector (a list of objects), not both`,
		},
		{
			name: "a selector of expressions",
			body: `
references: settings: {apiVersion: "v1", kind: "ConfigMap", selector: matchExpressions: []}
`,
			want: `t/t.cue:8:71: references.settings.selector.matchExpressions: only matchLabels is supported in a reference's selector`,
		},
		{
			name: "an empty selector",
			body: `
references: settings: {apiVersion: "v1", kind: "ConfigMap", selector: matchLabels: {}}
`,
			want: `t/t.cue:8:71: references.settings.selector.matchLabels: must name at least one label: an empty selector would select every object of the kind`,
		},
		{
			name: "a bad label value",
			body: `
references: settings: {apiVersion: "v1", kind: "ConfigMap", selector: matchLabels: team: "not a label!"}
`,
			want: `t/t.cue:8:71: references.settings.selector.matchLabels: values[0][team]: Invalid value: "not a label!": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
		},
		{
			name: "a reference that reads observed state",
			body: `
children: app: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "a"}
references: settings: {apiVersion: "v1", kind: "ConfigMap", metadata: name: observed.app.metadata.name}
`,
			want: `t/t.cue:9:77: references.settings: a reference is read from the parent alone, before anything else: it cannot depend on app (it reads observed.app)`,
		},
		{
			name: "dependsOn a reference",
			body: `
references: settings: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "s"}
children: app: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "a", dependsOn: ["settings"]}
`,
			want: `t/t.cue:9:87: children.app.dependsOn: "settings" is a reference: it is never created, so there is nothing to wait for (read observed.settings instead)`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTemplate(t, dir, "t.cue", graphHead+tc.body)
			_, err := Load(dir)
			require.Error(t, err)
			var le *LoadError
			require.ErrorAs(t, err, &le)
			assert.Equal(t, tc.want, err.Error())
		})
	}
}

// TestReferences: references are evaluated from the parent alone; their
// kinds are not child kinds; the referenced object reaches the children
// as observed.<name>.
func TestReferences(t *testing.T) {
	dir := t.TempDir()
	writeTemplate(t, dir, "t.cue", graphHead+`
parent: spec: settings: *"settings" | string
references: {
	settings: {apiVersion: "v1", kind: "ConfigMap", metadata: name: parent.spec.settings}
	db: {apiVersion: "v1", kind: "Secret", metadata: {name: "db", namespace: "shared"}}
	peers: {apiVersion: "v1", kind: "Service", selector: matchLabels: team: "a"}
}
children: app: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: "app"
	data: greeting: observed.settings.data.greeting
	data: peers: "\(len(observed.peers.items))"
}
`)
	tm := loadOne(t, dir)
	assert.True(t, tm.HasReferences())
	assert.Equal(t, []schema.GroupVersionKind{{Version: "v1", Kind: "ConfigMap"}}, tm.ChildKinds(), "the referenced Secret and Service are no child kinds")
	assert.Equal(t, []schema.GroupVersionKind{{Version: "v1", Kind: "ConfigMap"}, {Version: "v1", Kind: "Secret"}, {Version: "v1", Kind: "Service"}}, tm.ReferenceKinds())

	parent := shop()
	parent.Object["spec"] = map[string]any{"settings": "team-a"}
	refs, err := tm.References(parent)
	require.NoError(t, err)
	assert.Equal(t, []Reference{
		{Name: "db", GVK: schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, Namespace: "shared", ObjectName: "db"},
		{Name: "peers", GVK: schema.GroupVersionKind{Version: "v1", Kind: "Service"}, Selector: map[string]string{"team": "a"}},
		{Name: "settings", GVK: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, ObjectName: "team-a"},
	}, refs)
	assert.Equal(t, "Secret shared/db", refs[0].String())
	assert.Equal(t, "Service with labels team=a", refs[1].String())

	res, err := tm.Evaluate(Input{Parent: parent, Observed: map[string]any{
		"settings": map[string]any{"data": map[string]any{"greeting": "hello"}},
		"peers":    map[string]any{"items": []any{map[string]any{}, map[string]any{}}},
	}})
	require.NoError(t, err)
	require.Len(t, res.Children, 1)
	assert.Equal(t, map[string]any{"greeting": "hello", "peers": "2"}, res.Children[0].Object.Object["data"])
	assert.Empty(t, res.Children[0].DependsOn, "a reference is not created: nothing to wait for")

	parent.Object["spec"] = map[string]any{"settings": ""}
	_, err = tm.References(parent)
	require.Error(t, err)
	assert.Equal(t, `t/t.cue:10:60: references.settings.metadata.name: every reference by name needs a concrete, non-empty metadata.name`, err.Error())
}
