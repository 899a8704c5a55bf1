package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/engine"
)

// hatcherTemplate has a child of a kind (Egg.late.cuengine.dev) whose CRD
// is installed only after the parent exists.
const hatcherTemplate = `parent: {apiVersion: "hatch.cuengine.dev/v1", kind: "Hatcher"}
children: egg: {
	apiVersion: "late.cuengine.dev/v1"
	kind:       "Egg"
	metadata: name: parent.metadata.name
	spec: size: 3
}
`

// eggCRD is the child's CRD, installed late.
func eggCRD() *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "eggs.late.cuengine.dev"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "late.cuengine.dev",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "eggs", Singular: "egg", Kind: "Egg", ListKind: "EggList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve}}}},
		},
	}
}

// TestChildOfALateCRD: a child whose kind the cluster does not serve yet
// is refused (ChildRefused, no matches for kind); once its CRD is
// established the parent is reconciled again, with nothing touching it,
// and the child is created within seconds.
func TestChildOfALateCRD(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	set := serveTemplates(t, map[string]string{"hatcher.cue": hatcherTemplate}, engine.Options{})
	hatcherGVK := schema.GroupVersionKind{Group: "hatch.cuengine.dev", Version: "v1", Kind: "Hatcher"}
	_, ok := set.Lookup(hatcherGVK)
	require.True(t, ok)

	ns := namespace(t)
	p := parent(hatcherGVK, ns, "h", map[string]any{})
	require.NoError(t, k8s.Create(ctx, p))
	eventually(t, "ChildRefused: no matches for kind", func(ctx context.Context) (bool, error) {
		c, err := condition(ctx, p, contract.ConditionSynced)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == contract.ReasonChildRefused &&
			strings.Contains(c.Message, "no matches for kind"), err
	})
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(hatcherGVK)
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(p), cur))
	generation, resourceVersion := cur.GetGeneration(), cur.GetResourceVersion()

	installCRD(t, eggCRD())
	egg := &unstructured.Unstructured{}
	egg.SetGroupVersionKind(schema.GroupVersionKind{Group: "late.cuengine.dev", Version: "v1", Kind: "Egg"})
	eventuallyWithin(t, "the Egg created and the parent Synced", 10*time.Second, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "h"}, egg); err != nil {
			return false, err
		}
		c, err := condition(ctx, p, contract.ConditionSynced)
		return c != nil && c.Status == metav1.ConditionTrue, err
	})
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(p), cur))
	assert.Equal(t, generation, cur.GetGeneration(), "nobody touched the parent's spec")
	assert.NotEqual(t, resourceVersion, cur.GetResourceVersion(), "only the engine's status write changed it")
}
