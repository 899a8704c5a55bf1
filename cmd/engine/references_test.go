package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// TestRBACReferences: engine rbac grants the example TeamApp's referenced
// ConfigMaps get, list and watch and nothing more; Secrets are granted as
// the child they are of the WebApp (its connection Secret), which no
// template references.
func TestRBACReferences(t *testing.T) {
	out, errOut, code := run(t, "rbac", "--templates", examples)
	require.Equal(t, 0, code, errOut)
	docs := strings.Split(out, "\n---\n")
	require.Len(t, docs, 4, "a ClusterRole, its binding, the Role in --namespace and its binding")
	var role rbacv1.ClusterRole
	require.NoError(t, yaml.Unmarshal([]byte(docs[0]), &role))
	var configMaps, secrets []rbacv1.PolicyRule
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			switch res {
			case "configmaps":
				configMaps = append(configMaps, r)
			case "secrets":
				secrets = append(secrets, r)
			}
		}
	}
	require.Len(t, secrets, 1, "one rule for the WebApp's connection Secrets")
	assert.Contains(t, secrets[0].Verbs, "create", "a child's rule, not a reference's")
	assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}}, configMaps)
}

// TestRenderReferences: engine render --observed matches a live object to
// the reference with its kind, namespace and name, not to another; a
// reference given nowhere is the engine's ReferenceNotFound message.
func TestRenderReferences(t *testing.T) {
	observed := filepath.Join(t.TempDir(), "live.yaml")
	require.NoError(t, os.WriteFile(observed, []byte(`
apiVersion: v1
kind: ConfigMap
metadata: {name: team-settings, namespace: elsewhere}
data: {team: wrong}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: team-settings, namespace: default}
data: {team: checkout}
`), 0o644))
	out, errOut, code := run(t, "render", "--templates", examples, "-f", "../../examples/crs/teamapp.yaml", "--observed", observed)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "- name: TEAM\n          value: checkout\n")
	assert.Contains(t, out, "status:\n  team: checkout\n")

	_, errOut, code = run(t, "render", "--templates", examples, "-f", "../../examples/crs/teamapp.yaml")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "TeamApp checkout: waiting for referenced ConfigMap default/team-settings (references.settings): nothing is created until it exists")
}
