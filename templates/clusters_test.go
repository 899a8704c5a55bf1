package templates

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/templates/policy"
)

// tenantTemplate puts a Namespace and a Deployment in the cluster the
// spec names, and a ConfigMap in the engine's own cluster.
const tenantTemplate = `parent: {apiVersion: "example.com/v1", kind: "Tenant", spec: cluster: string}
policy: {clusterScoped: true, clusters: POLICY}
children: ns: {cluster: parent.spec.cluster, apiVersion: "v1", kind: "Namespace", metadata: name: parent.metadata.name}
children: app: {cluster: parent.spec.cluster, dependsOn: ["ns"], apiVersion: "apps/v1", kind: "Deployment", metadata: {name: "app", namespace: parent.metadata.name}, spec: {selector: matchLabels: app: "a", template: {metadata: labels: app: "a", spec: containers: [{name: "a", image: "nginx"}]}}}
children: note: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "note", data: cluster: parent.spec.cluster}
children: pinned: {cluster: "LITERAL", apiVersion: "v1", kind: "ConfigMap", metadata: {name: "pinned", namespace: "default"}}
`

func writeTenant(t *testing.T, policy, literal string) string {
	t.Helper()
	dir := t.TempDir()
	src := tenantTemplate
	for k, v := range map[string]string{"POLICY": policy, "LITERAL": literal} {
		src = strings.ReplaceAll(src, k, v)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "t.cue"), []byte(src), 0o644))
	return dir
}

func TestChildClusterEvaluated(t *testing.T) {
	tm := loadOne(t, writeTenant(t, `["workload-a", "workload-b"]`, "workload-b"))
	parent := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Tenant",
		"metadata": map[string]any{"name": "acme", "namespace": "default"},
		"spec":     map[string]any{"cluster": "workload-a"},
	}}
	res, err := tm.Evaluate(Input{Parent: parent})
	require.NoError(t, err)
	got := map[string]string{}
	for _, c := range res.Children {
		got[c.Name] = c.Cluster
		_, has := c.Object.Object[fieldCluster]
		assert.False(t, has, "the cluster field is the engine's, never applied: %s", c.Name)
	}
	assert.Equal(t, map[string]string{"ns": "workload-a", "app": "workload-a", "note": "", "pinned": "workload-b"}, got)
	assert.Equal(t, []string{"workload-a", "workload-b"}, tm.Policy.Clusters.Names)
}

func TestChildClusterRefusedAtLoad(t *testing.T) {
	tests := []struct{ name, policy, literal, want string }{
		{"no policy", "false", "workload-b",
			`t.cue:6:20: children.pinned.cluster: ConfigMap "pinned" is put in cluster "workload-b"; list it in policy: clusters in the template to allow it`},
		{"not listed", `["workload-a"]`, "workload-b",
			`t.cue:6:20: children.pinned.cluster: ConfigMap "pinned" is put in cluster "workload-b", which the template's policy.clusters does not list (workload-a)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(writeTenant(t, tt.policy, tt.literal))
			var le *LoadError
			require.ErrorAs(t, err, &le)
			assert.Equal(t, tt.want, err.Error())
		})
	}
	t.Run("any cluster", func(t *testing.T) {
		tm := loadOne(t, writeTenant(t, "true", "workload-b"))
		assert.True(t, tm.Policy.Clusters.Allows("anything"))
	})
}

func TestChildClusterBadValues(t *testing.T) {
	_, err := Load(writeTenant(t, `["Not_A_Name"]`, "x"))
	require.ErrorContains(t, err, `policy.clusters: list items must be cluster names (DNS labels), not "Not_A_Name"`)

	tm := loadOne(t, writeTenant(t, "true", "workload-b"))
	parent := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Tenant",
		"metadata": map[string]any{"name": "acme", "namespace": "default"},
		"spec":     map[string]any{"cluster": "Bad_Name"},
	}}
	_, err = tm.Evaluate(Input{Parent: parent})
	require.ErrorContains(t, err, `t.cue:3:16: children.ns.cluster: "Bad_Name" is not a cluster name (a DNS label: lower case letters, digits and '-', at most 63)`)
}

func TestPolicyClustersWithin(t *testing.T) {
	p := policy.Policy{Clusters: policy.Namespaces{All: true}}
	bound := policy.Policy{Clusters: policy.Namespaces{Names: []string{"a"}}}
	got := p.Within(bound)
	assert.True(t, got.Clusters.Allows("a"))
	assert.False(t, got.Clusters.Allows("b"))
	assert.False(t, policy.Policy{}.Within(p).Clusters.Any())
}

func TestChildClustersForTheGraph(t *testing.T) {
	tm := loadOne(t, writeTenant(t, "true", "workload-b"))
	assert.Equal(t, map[string]string{"ns": "", "app": "", "pinned": "workload-b"}, tm.ChildClusters())
}
