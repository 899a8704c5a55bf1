package render

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/contract"
)

// leftDeployment is a desired Deployment with replicas and annotations,
// leaving what ownership says to others.
func leftDeployment(replicas int64, annotations map[string]any, ownership string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "annotations": annotations},
		"spec":     map[string]any{"replicas": replicas, "paused": false},
	}}
	if ownership != "" {
		a := u.GetAnnotations()
		a[contract.AnnotationOwnership] = ownership
		u.SetAnnotations(a)
	}
	return u
}

func TestOwnershipAnnotation(t *testing.T) {
	modes := map[string]string{"spec.replicas": contract.OwnershipCreateOnly, "metadata.annotations": contract.OwnershipShared}
	v := formatOwnership(modes)
	assert.Equal(t, "metadata.annotations=Shared,spec.replicas=CreateOnly", v)
	d := leftDeployment(3, map[string]any{}, v)
	assert.Equal(t, modes, Ownership(d))
	assert.Equal(t, []string{"spec.replicas"}, CreateOnlyPaths(d))
	assert.Nil(t, Ownership(leftDeployment(3, map[string]any{}, "")))
}

// TestAppliedHashLeavesCreateOnlyOut: a CreateOnly value is no reason to
// apply; the marker itself is.
func TestAppliedHashLeavesCreateOnlyOut(t *testing.T) {
	marked := AppliedHash(leftDeployment(3, map[string]any{}, "spec.replicas=CreateOnly"))
	assert.Equal(t, marked, AppliedHash(leftDeployment(7, map[string]any{}, "spec.replicas=CreateOnly")))
	assert.NotEqual(t, marked, AppliedHash(leftDeployment(3, map[string]any{}, "")), "removing the marker is one apply")
	assert.NotEqual(t, AppliedHash(leftDeployment(3, map[string]any{}, "")), AppliedHash(leftDeployment(7, map[string]any{}, "")))
}

func TestKeepingLive(t *testing.T) {
	t.Run("nothing left to others: the desired object itself", func(t *testing.T) {
		d := leftDeployment(3, map[string]any{"team": "a"}, "")
		assert.Same(t, d, KeepingLive(d, leftDeployment(5, map[string]any{"x": "y"}, "")))
	})
	t.Run("CreateOnly takes the live value", func(t *testing.T) {
		d := leftDeployment(3, map[string]any{}, "spec.replicas=CreateOnly")
		got := KeepingLive(d, leftDeployment(5, map[string]any{}, ""))
		n, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas")
		assert.Equal(t, int64(5), n)
		n, _, _ = unstructured.NestedInt64(d.Object, "spec", "replicas")
		assert.Equal(t, int64(3), n, "the desired object is not changed")
	})
	t.Run("CreateOnly absent live: left out", func(t *testing.T) {
		d := leftDeployment(3, map[string]any{}, "spec.replicas=CreateOnly")
		live := leftDeployment(3, map[string]any{}, "")
		unstructured.RemoveNestedField(live.Object, "spec", "replicas")
		_, found, _ := unstructured.NestedFieldNoCopy(KeepingLive(d, live).Object, "spec", "replicas")
		assert.False(t, found)
	})
	t.Run("Shared keeps the keys the engine owns, not others'", func(t *testing.T) {
		d := leftDeployment(3, map[string]any{"team": "a"}, "metadata.annotations=Shared")
		live := leftDeployment(3, map[string]any{"team": "b", "old": "x", "injected": "yes"}, "")
		live.SetManagedFields([]metav1.ManagedFieldsEntry{
			{Manager: contract.FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{".":{},"f:team":{},"f:old":{}}}}`)},
			{Manager: "kubectl-annotate", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{"f:injected":{}}}}`)},
		})
		got := KeepingLive(d, live)
		assert.Equal(t, map[string]string{"team": "a", "old": "x", contract.AnnotationOwnership: "metadata.annotations=Shared"}, got.GetAnnotations(),
			"the template's team, the engine's old; injected is another manager's: not sent")
	})
	t.Run("Shared keeps every key of a map owned whole", func(t *testing.T) {
		d := leftDeployment(3, map[string]any{"team": "a"}, "metadata.annotations=Shared")
		live := leftDeployment(3, map[string]any{"team": "a", "injected": "yes"}, "")
		live.SetManagedFields([]metav1.ManagedFieldsEntry{
			{Manager: "injector", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{}}}`)},
		})
		assert.Equal(t, "yes", KeepingLive(d, live).GetAnnotations()["injected"])
	})
}
