package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cuengine/engine/clusters"
)

// placement puts a Namespace in the cluster its parent names, a
// ConfigMap in the literal cluster LITERAL, and one locally.
const placement = `parent: {apiVersion: "multi.cuengine.dev/v1", kind: "Placement", spec: cluster: string}
policy: {clusterScoped: true, crossNamespace: true, clusters: ["west", "east"]}
children: ns: {cluster: parent.spec.cluster, apiVersion: "v1", kind: "Namespace", metadata: name: parent.metadata.name}
children: pinned: {cluster: "LITERAL", apiVersion: "v1", kind: "ConfigMap", metadata: {name: "pinned", namespace: "default"}}
children: note: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "note"}
`

func placementDir(t *testing.T, literal string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "placement.cue"), []byte(strings.ReplaceAll(placement, "LITERAL", literal)), 0o644))
	return dir
}

// TestVetRefusesACluster: a child put in a cluster the template's policy
// does not list is a vet error at its line.
func TestVetRefusesACluster(t *testing.T) {
	_, errOut, code := run(t, "vet", "--templates", placementDir(t, "north"))
	assert.Equal(t, 1, code)
	assert.Equal(t, `placement.cue:4:20: children.pinned.cluster: ConfigMap "pinned" is put in cluster "north", which the template's policy.clusters does not list (west, east)`, errOut)
	_, errOut, code = run(t, "vet", "--templates", placementDir(t, "east"))
	assert.Equal(t, 0, code, errOut)
}

// TestRenderAndGraphShowTheCluster: engine render and graph say which
// cluster each child goes to.
func TestRenderAndGraphShowTheCluster(t *testing.T) {
	dir := placementDir(t, "east")
	parent := filepath.Join(t.TempDir(), "p.yaml")
	require.NoError(t, os.WriteFile(parent, []byte("apiVersion: multi.cuengine.dev/v1\nkind: Placement\nmetadata: {name: acme, namespace: default}\nspec: {cluster: west}\n"), 0o644))
	out, errOut, code := run(t, "render", "--templates", dir, "-f", parent)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "# child \"ns\" (in cluster west)\n")
	assert.Contains(t, out, "# child \"pinned\" (in cluster east)\n")
	assert.Contains(t, out, "# child \"note\"\n")
	assert.Contains(t, out, "engine.cuengine.dev/cluster: west")

	out, errOut, code = run(t, "graph", "--templates", dir)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, `"children.ns" [label="ns: Namespace (in the cluster its parent names)"];`)
	assert.Contains(t, out, `"children.pinned" [label="pinned: ConfigMap (in cluster east)"];`)
	assert.Contains(t, out, `"children.note" [label="note: ConfigMap"];`)
}

type fakeClusters []clusters.Status

func (f fakeClusters) ClusterStatus() []clusters.Status       { return f }
func (f fakeClusters) ClusterRegistrationsUnreadable() string { return "" }

type unreadableClusters string

func (unreadableClusters) ClusterStatus() []clusters.Status         { return nil }
func (u unreadableClusters) ClusterRegistrationsUnreadable() string { return string(u) }

// TestReadyzNamesTheClusters: /readyz?verbose says how each workload
// cluster is, a line each; none of them makes the engine unready.
func TestReadyzNamesTheClusters(t *testing.T) {
	seen := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	lines := clusterLines(fakeClusters{
		{Name: "east", Origin: "Secret engine-system/east", Error: "connection refused"},
		{Name: "gone", Origin: "Secret engine-system/gone", Removed: true, Error: `cluster "gone" was removed`},
		{Name: "west", Origin: "Secret engine-system/west", Up: true, LastSeen: seen},
	})()
	assert.Equal(t, []string{
		"cluster east (Secret engine-system/east): down: connection refused",
		`cluster gone (Secret engine-system/gone): removed: cluster "gone" was removed`,
		"cluster west (Secret engine-system/west): up, last seen 2026-12-02T10:00:00Z",
	}, lines)
	assert.Empty(t, clusterLines(fakeClusters(nil))())
	assert.Equal(t, []string{`cluster registrations: unreadable (the clusters they register are unknown): reading the cluster Secrets in namespace engine-system: secrets is forbidden`},
		clusterLines(unreadableClusters("reading the cluster Secrets in namespace engine-system: secrets is forbidden"))(), "a role without the Secrets is said")
}
