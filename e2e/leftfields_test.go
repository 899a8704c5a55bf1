package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

var scaledGVR = schema.GroupVersionResource{Group: "test.cuengine.dev", Version: "v1", Resource: "scaleds"}

// engineEntry is the engine's managed-fields entry of an object: its apply.
func engineEntry(d *appsv1.Deployment) string {
	for _, e := range d.ManagedFields {
		if e.Manager == "engine" && e.Operation == metav1.ManagedFieldsOperationApply {
			b, _ := json.Marshal(e)
			return string(b)
		}
	}
	return ""
}

// scaleOwned reports whether a manager owns the Deployment's replicas
// through the scale subresource.
func scaleOwned(t *testing.T, d *appsv1.Deployment) bool {
	t.Helper()
	for _, e := range d.ManagedFields {
		var set map[string]any
		require.NoError(t, json.Unmarshal(e.FieldsV1.GetRawBytes(), &set))
		spec, _ := set["f:spec"].(map[string]any)
		if _, ok := spec["f:replicas"]; ok && e.Subresource == "scale" {
			return true
		}
	}
	return false
}

// TestCreateOnlyReplicasEndToEnd: a Deployment whose replicas the template
// leaves to others (testdata/templates/scaled.cue) keeps a `kubectl scale`
// for two minutes of reconciles with no write of the engine, and still
// gets a new image, keeping its scale; the same Deployment without the
// marker is scaled back.
func TestCreateOnlyReplicasEndToEnd(t *testing.T) {
	dir := templatesDir(t, "engine/testdata/templates/scaled.cue")
	installCRDs(t, dir)
	startEngine(t, dir)
	ns := namespace(t)
	ctx := context.Background()
	kubectlApply(t, ns, `
apiVersion: test.cuengine.dev/v1
kind: Scaled
metadata: {name: kept}
spec: {replicas: 3}
---
apiVersion: test.cuengine.dev/v1
kind: Scaled
metadata: {name: reverted}
spec: {replicas: 3, createOnly: false}
`)
	deployment := func(ctx context.Context, name string) (*appsv1.Deployment, error) {
		return kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	}
	for _, name := range []string{"kept", "reverted"} {
		eventually(t, "Deployment "+name+" with 3 ready replicas", 90*time.Second, func(ctx context.Context) (bool, error) {
			d, err := deployment(ctx, name)
			return err == nil && *d.Spec.Replicas == 3 && d.Status.ReadyReplicas == 3, err
		})
	}

	kubectl(t, "-n", ns, "scale", "deployment", "reverted", "--replicas", "5")
	kubectl(t, "-n", ns, "scale", "deployment", "kept", "--replicas", "5")

	t.Run("without the marker the scale is undone", func(t *testing.T) {
		eventually(t, "Deployment reverted back at 3", 30*time.Second, func(ctx context.Context) (bool, error) {
			d, err := deployment(ctx, "reverted")
			return err == nil && *d.Spec.Replicas == 3, err
		})
	})

	t.Run("with the marker the scale stays, with no write of the engine", func(t *testing.T) {
		scaled, err := deployment(ctx, "kept")
		require.NoError(t, err)
		require.Equal(t, int32(5), *scaled.Spec.Replicas)
		require.True(t, scaleOwned(t, scaled), "kubectl scale owns the replicas")
		entry := engineEntry(scaled)
		require.NotEmpty(t, entry)
		// Two minutes of reconciles: the scale's own events, the
		// Deployment controller's status writes, and a touch of the parent
		// every ten seconds. Every tick asserts.
		end := time.Now().Add(2 * time.Minute)
		touches := 0
		for tick := 0; time.Now().Before(end); tick++ {
			if tick%5 == 0 {
				touches++
				_, err := dyn.Resource(scaledGVR).Namespace(ns).Patch(ctx, "kept", types.MergePatchType,
					fmt.Appendf(nil, `{"metadata":{"labels":{"touched":"%d"}}}`, touches), metav1.PatchOptions{})
				require.NoError(t, err)
			}
			d, err := deployment(ctx, "kept")
			require.NoError(t, err)
			require.Equal(t, int32(5), *d.Spec.Replicas, "replicas at tick %d", tick)
			require.Equal(t, scaled.Generation, d.Generation, "no change of the spec at tick %d", tick)
			require.Equal(t, entry, engineEntry(d), "no write of the engine at tick %d", tick)
			time.Sleep(2 * time.Second) // the observation window's tick
		}
		assert.GreaterOrEqual(t, touches, 12)
	})

	t.Run("an image change reaches the Deployment and keeps the scale", func(t *testing.T) {
		kubectl(t, "-n", ns, "patch", "scaled", "kept", "--type=merge", "-p", `{"spec":{"image":"nginx:1.28"}}`)
		eventually(t, "the new image", 30*time.Second, func(ctx context.Context) (bool, error) {
			d, err := deployment(ctx, "kept")
			return err == nil && d.Spec.Template.Spec.Containers[0].Image == "nginx:1.28", err
		})
		d, err := deployment(ctx, "kept")
		require.NoError(t, err)
		assert.Equal(t, int32(5), *d.Spec.Replicas)
		assert.True(t, scaleOwned(t, d), "kubectl scale still owns the replicas")
		eventually(t, "5 ready replicas of the new image", 90*time.Second, func(ctx context.Context) (bool, error) {
			d, err := deployment(ctx, "kept")
			return err == nil && d.Status.UpdatedReplicas == 5 && d.Status.ReadyReplicas == 5 && *d.Spec.Replicas == 5, err
		})
	})
}
