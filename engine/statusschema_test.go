package engine_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var pantryGVK = schema.GroupVersionKind{Group: "test.cuengine.dev", Version: "v1", Kind: "Pantry"}

// TestStatusFieldsUnderIfAreStored: the status fields a template sets under
// an `if` and in a comprehension reach the stored object, and a user's key
// in a map with a default survives admission, while the default applies
// when the map is absent (testdata/templates/pantry.cue).
func TestStatusFieldsUnderIfAreStored(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	ns := namespace(t)
	require.NoError(t, k8s.Create(ctx, parent(pantryGVK, ns, "jam", map[string]any{"labels": map[string]any{"team": "a"}})))
	require.NoError(t, k8s.Create(ctx, parent(pantryGVK, ns, "plain", map[string]any{})))

	cm := &corev1.ConfigMap{}
	eventually(t, "the ConfigMap's uid in status.configUID, the team in status.team", func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "jam"}, cm); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(pantryGVK)
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "jam"}, got); err != nil {
			return false, err
		}
		uid, _, _ := unstructured.NestedString(got.Object, "status", "configUID")
		team, _, _ := unstructured.NestedString(got.Object, "status", "team")
		return uid == string(cm.UID) && team == "a", nil
	})
	assert.Equal(t, "a", cm.Labels["team"], "the user's label...")
	assert.NotContains(t, cm.Labels, "app", "...not the default")

	eventually(t, "the default labels on the other ConfigMap", func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "plain"}, cm)
		return err == nil && cm.Labels["app"] == "pantry", client.IgnoreNotFound(err)
	})
}
