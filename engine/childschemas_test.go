package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/templates"
)

// TestClusterSchemasCheckAnotherOperatorsKind: a child of a kind that only
// the cluster knows (a CRD no template defines) is unchecked while the CRD
// is missing, and checked against the cluster's OpenAPI schema at the next
// load once the CRD is installed.
func TestClusterSchemasCheckAnotherOperatorsKind(t *testing.T) {
	controlPlane(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "t.cue"), []byte(`parent: {apiVersion: "owner.cuengine.dev/v1", kind: "Owner"}
children: g: {
	apiVersion: "gizmo.cuengine.dev/v1"
	kind:       "Gizmo"
	metadata: name: "g"
	spec: colr: "red"
}
`), 0o644))
	cluster, err := engine.NewClusterSchemas(cfg)
	require.NoError(t, err)
	opts := templates.LoadOptions{Cluster: cluster}

	doc, err := cluster.OpenAPIV3(schema.GroupVersion{Group: "apps", Version: "v1"})
	require.NoError(t, err)
	assert.Contains(t, string(doc), `"io.k8s.api.apps.v1.Deployment"`)

	set, err := templates.LoadWith(dir, opts)
	require.NoError(t, err)
	gizmo := schema.GroupVersionKind{Group: "gizmo.cuengine.dev", Version: "v1", Kind: "Gizmo"}
	assert.Equal(t, []templates.Unchecked{{Template: "t.cue", Child: "g", Kind: gizmo}}, set.Unchecked())

	installCRD(t, &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gizmos.gizmo.cuengine.dev"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: gizmo.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Gizmo", Plural: "gizmos", Singular: "gizmo", ListKind: "GizmoList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"color": {Type: "string"}}},
					},
				}},
			}},
		},
	})
	const want = "t.cue:6:8: children.g.spec.colr: field not allowed"
	eventually(t, "the child checked against the new CRD's schema", func(context.Context) (bool, error) {
		_, err := templates.LoadWith(dir, opts)
		return err != nil && err.Error() == want, nil
	})
}
