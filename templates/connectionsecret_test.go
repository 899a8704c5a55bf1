package templates

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestConnectionSecret(t *testing.T) {
	cases := []struct {
		name   string
		field  string
		want   string // ConnectionSecret, when valid
		errMsg string
	}{
		{name: "valid", field: `connectionSecret: name: parent.metadata.name + "-db"`, want: "s-db"},
		{name: "absent", field: ``, want: ""},
		{name: "not an object", field: `connectionSecret: "s-db"`,
			errMsg: `t/t.cue:5:2: resources.db.connectionSecret: must be an object such as {name: "app-db"}`},
		{name: "unknown field", field: `connectionSecret: {name: "a", namespace: "b"}`,
			errMsg: `t/t.cue:5:2: resources.db.connectionSecret.namespace: is not a known field (known: name)`},
		{name: "empty name", field: `connectionSecret: name: ""`,
			errMsg: `t/t.cue:5:2: resources.db.connectionSecret.name: must be a non-empty string: the name of the Secret to write the resource's credentials into`},
		{name: "invalid name", field: `connectionSecret: name: "Shop_DB"`,
			errMsg: `t/t.cue:5:2: resources.db.connectionSecret.name: "Shop_DB" is not a valid Secret name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTemplate(t, dir, "t.cue", `package t

parent: {apiVersion: "example.com/v1", kind: "Shop"}
resources: db: {
	provider: "postgresql", spec: database: "shop"
	`+c.field+`
}
`)
			tm := loadOne(t, dir)
			res, err := tm.Evaluate(Input{Parent: shopParent()})
			if c.errMsg != "" {
				require.Error(t, err)
				assert.Equal(t, c.errMsg, err.Error())
				return
			}
			require.NoError(t, err)
			require.Len(t, res.Resources, 1)
			assert.Equal(t, c.want, res.Resources[0].ConnectionSecret)
			assert.Equal(t, c.want != "", slices.Contains(tm.ChildKinds(), schema.GroupVersionKind{Version: "v1", Kind: "Secret"}),
				"a connection Secret is a child kind, watched and granted")
		})
	}
}

func TestConnectionSecretsAreOnePerResource(t *testing.T) {
	dir := t.TempDir()
	writeTemplate(t, dir, "t.cue", `package t

parent: {apiVersion: "example.com/v1", kind: "Shop"}
resources: {
	a: {provider: "postgresql", spec: database: "a", connectionSecret: name: "db"}
	b: {provider: "postgresql", spec: database: "b", connectionSecret: name: "db"}
}
`)
	_, err := loadOne(t, dir).Evaluate(Input{Parent: shopParent()})
	require.Error(t, err)
	assert.Equal(t, `t/t.cue:6:6: resources.b.connectionSecret.name: "db" is already the connection Secret of resources.a: each resource needs its own`, err.Error())
}

func shopParent() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Shop",
		"metadata": map[string]any{"name": "s", "namespace": "default"},
	}}
}
