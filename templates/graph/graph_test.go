package graph

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"cuelang.org/go/cue/token"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// graphHead is the parent of the graph tests' templates.
const graphHead = `package t

parent: {
	apiVersion: "example.com/v1"
	kind:       "Shop"
}
`

// graphOf writes the files of the template t (a subdirectory of a
// templates directory), in the order the loader reads them, and builds
// its graph, with positions relative to the templates directory as the
// loader gives them.
func graphOf(t *testing.T, files map[string]string) *Graph {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "t"), 0o755))
	var paths []string
	for name, src := range files {
		p := filepath.Join(dir, "t", name)
		require.NoError(t, os.WriteFile(p, []byte(src), 0o644))
		paths = append(paths, p)
	}
	slices.Sort(paths)
	g, problems, err := Of(paths, func(p token.Pos) string {
		r, err := filepath.Rel(dir, p.Filename())
		require.NoError(t, err)
		return fmt.Sprintf("%s:%d:%d", r, p.Line(), p.Column())
	})
	require.NoError(t, err)
	require.Empty(t, problems)
	return g
}

func TestGraph(t *testing.T) {
	tests := []struct {
		name string
		body string
		more string // a second file of the package, b.cue
		want []Node
		// warnings, when set, are the graph's (Graph.Warnings).
		warnings []string
	}{
		{
			name: "observed reference in a guard and in the value",
			body: `
resources: bucket: provider: "gcs"
if observed.bucket != _|_ {
	children: app: {
		apiVersion: "apps/v1"
		kind:       "Deployment"
		metadata: name: observed.bucket.name
	}
}
`,
			want: []Node{
				{Kind: ChildNode, Name: "app", Type: "Deployment", Pos: "t/t.cue:10:12", DependsOn: []Dependency{{Name: "bucket", Via: ViaObserved, Pos: "t/t.cue:9:4"}},
					Presence: &Presence{Observed: []string{"bucket"}, Pos: "t/t.cue:9:4"}},
				{Kind: ResourceNode, Name: "bucket", Type: "gcs", Pos: "t/t.cue:8:12"},
			},
		},
		{
			name: "presence: what the clauses read, besides the spec",
			body: `
children: deployment: {apiVersion: "apps/v1", kind: "Deployment", metadata: name: "web", readyWhen: observed.svc.spec.clusterIP != ""}
references: config: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "c"}
children: {
	if parent.spec.expose && (*observed.deployment.status.readyReplicas | 0) > 0 || observed.svc != _|_ {
		svc: {apiVersion: "v1", kind: "Service", metadata: name: "web"}
	}
	if (*parent.metadata.labels.tier | "") == "web" && observed.deployment != _|_ {
		labelled: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "l"}
	}
	if (*observed.config.data.on | "") == "true" {
		configured: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "c"}
	}
}
children: both: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "b"}
if observed.deployment != _|_ {
	children: both: data: x: "y"
}
parent: spec: expose: *true | bool
`,
			want: []Node{
				{Kind: ChildNode, Name: "both", Type: "ConfigMap", Pos: "t/t.cue:21:11", DependsOn: []Dependency{{Name: "deployment", Via: ViaObserved, Pos: "t/t.cue:22:4"}}},
				{Kind: ChildNode, Name: "configured", Type: "ConfigMap", Pos: "t/t.cue:18:3", DependsOn: []Dependency{{Name: "config", Via: ViaObserved, Pos: "t/t.cue:17:7"}},
					Presence: &Presence{Inputs: []string{"references.config"}, Pos: "t/t.cue:17:5"}},
				{Kind: ChildNode, Name: "deployment", Type: "Deployment", Pos: "t/t.cue:8:11"},
				{Kind: ChildNode, Name: "labelled", Type: "ConfigMap", Pos: "t/t.cue:15:3", DependsOn: []Dependency{{Name: "deployment", Via: ViaObserved, Pos: "t/t.cue:14:53"}},
					Presence: &Presence{Observed: []string{"deployment"}, Inputs: []string{"parent.metadata"}, Pos: "t/t.cue:14:5"}},
				{Kind: ChildNode, Name: "svc", Type: "Service", Pos: "t/t.cue:12:3", DependsOn: []Dependency{{Name: "deployment", Via: ViaObserved, Pos: "t/t.cue:11:29"}},
					Presence: &Presence{Observed: []string{"deployment", "svc"}, Pos: "t/t.cue:11:5"}},
				{Kind: ReferenceNode, Name: "config", Type: "ConfigMap", Pos: "t/t.cue:9:13"},
			},
			warnings: []string{`t/t.cue:14:5: children.labelled: its condition reads observed.deployment and parent.metadata: a change of either removes it, so a transient change of observed.deployment (an upstream briefly not ready) prunes it; declare it outside the if, with dependsOn: ["deployment"], and give what it waits for a readyWhen: it is then created once that is ready and never pruned because it stops being ready`},
		},
		{
			name: "a reference to another child's field, by path and by sibling name",
			body: `
children: {
	config: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "c"}
	deploy: {apiVersion: "apps/v1", kind: "Deployment", metadata: name: children.config.metadata.name}
	job: {apiVersion: "batch/v1", kind: "Job", metadata: name: config.metadata.name + "-job"}
}
`,
			want: []Node{
				{Kind: ChildNode, Name: "config", Type: "ConfigMap", Pos: "t/t.cue:9:2"},
				{Kind: ChildNode, Name: "deploy", Type: "Deployment", Pos: "t/t.cue:10:2", DependsOn: []Dependency{{Name: "config", Via: ViaReference, Pos: "t/t.cue:10:70"}}},
				{Kind: ChildNode, Name: "job", Type: "Job", Pos: "t/t.cue:11:2", DependsOn: []Dependency{{Name: "config", Via: ViaReference, Pos: "t/t.cue:11:61"}}},
			},
		},
		{
			name: "through a hidden field, a let and another file",
			body: `
let bucketName = observed.bucket.name
_url: observed.store.url
resources: bucket: provider: "gcs"
resources: store: provider: "gcs"
children: app: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: "app"
	data: {name: bucketName, url: _url, other: _fromB}
}
`,
			more: `package t

_fromB: *observed.queue.name | ""
resources: queue: provider: "pubsub"
`,
			want: []Node{
				{Kind: ChildNode, Name: "app", Type: "ConfigMap", Pos: "t/t.cue:12:11", DependsOn: []Dependency{
					{Name: "bucket", Via: ViaObserved, Pos: "t/t.cue:8:18"},
					{Name: "queue", Via: ViaObserved, Pos: "t/b.cue:3:10"},
					{Name: "store", Via: ViaObserved, Pos: "t/t.cue:9:7"},
				}},
				{Kind: ResourceNode, Name: "bucket", Type: "gcs", Pos: "t/t.cue:10:12"},
				{Kind: ResourceNode, Name: "queue", Type: "pubsub", Pos: "t/b.cue:4:12"},
				{Kind: ResourceNode, Name: "store", Type: "gcs", Pos: "t/t.cue:11:12"},
			},
		},
		{
			name: "dependsOn, its own status and labels named like fields are no edges",
			body: `
resources: bucket: provider: "gcs"
children: app: {
	apiVersion: "apps/v1"
	kind:       "Deployment"
	metadata: name: "app"
	dependsOn: ["bucket"]
	spec: replicas: *observed.app.spec.replicas | 1
	spec: template: metadata: labels: observed: "no"
}
status: bucket: *observed.bucket.name | ""
`,
			want: []Node{
				{Kind: ChildNode, Name: "app", Type: "Deployment", Pos: "t/t.cue:9:11", DependsOn: []Dependency{{Name: "bucket", Via: ViaDependsOn, Pos: "t/t.cue:13:14"}}},
				{Kind: ResourceNode, Name: "bucket", Type: "gcs", Pos: "t/t.cue:8:12"},
			},
		},
		{
			name: "references inside interpolations, in a label and in a value",
			body: `
resources: bucket: provider: "gcs"
resources: store: provider: "gcs"
children: app: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: "app"
	metadata: labels: "bucket-\(observed.bucket.name)": "yes"
	data: url: "gs://\(observed.store.name)/data"
}
`,
			want: []Node{
				{Kind: ChildNode, Name: "app", Type: "ConfigMap", Pos: "t/t.cue:10:11", DependsOn: []Dependency{
					{Name: "bucket", Via: ViaObserved, Pos: "t/t.cue:14:30"},
					{Name: "store", Via: ViaObserved, Pos: "t/t.cue:15:21"},
				}},
				{Kind: ResourceNode, Name: "bucket", Type: "gcs", Pos: "t/t.cue:8:12"},
				{Kind: ResourceNode, Name: "store", Type: "gcs", Pos: "t/t.cue:9:12"},
			},
		},
		{
			name: "a local named observed is not the engine's",
			body: `
resources: bucket: provider: "gcs"
children: app: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: "app"
	let observed = {bucket: name: "x"}
	data: name: observed.bucket.name
}
`,
			want: []Node{
				{Kind: ChildNode, Name: "app", Type: "ConfigMap", Pos: "t/t.cue:9:11"},
				{Kind: ResourceNode, Name: "bucket", Type: "gcs", Pos: "t/t.cue:8:12"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"t.cue": graphHead + tc.body}
			if tc.more != "" {
				files["b.cue"] = tc.more
			}
			g := graphOf(t, files)
			assert.Equal(t, tc.want, g.Nodes)
			if tc.warnings != nil {
				assert.Equal(t, tc.warnings, g.Warnings())
			}
		})
	}
}
