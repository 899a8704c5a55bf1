package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/diff"
)

// Fields left to other writers (testdata/templates/scaled.cue): a
// Deployment's replicas left to whoever scales it, its annotations shared
// with injectors.

var scaledGVK = schema.GroupVersionKind{Group: "test.cuengine.dev", Version: "v1", Kind: "Scaled"}

// scaleManager is the field manager of the test's scale subresource
// updates, as an autoscaler's.
const scaleManager = "autoscaler"

// scaleTo updates the Deployment's scale subresource, as a
// HorizontalPodAutoscaler and kubectl scale do.
func scaleTo(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ctx := context.Background()
	s, err := cs.AppsV1().Deployments(ns).GetScale(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	s.Spec.Replicas = replicas
	_, err = cs.AppsV1().Deployments(ns).UpdateScale(ctx, name, s, metav1.UpdateOptions{FieldManager: scaleManager})
	require.NoError(t, err)
}

// patchSpec merge-patches a parent's spec.
func patchSpec(t *testing.T, p *unstructured.Unstructured, spec string) {
	t.Helper()
	require.NoError(t, k8s.Patch(context.Background(), p, client.RawPatch("application/merge-patch+json", []byte(`{"spec":`+spec+`}`))))
}

// touch changes a parent's label: a reconcile whose inputs change nothing
// the engine writes.
func touch(t *testing.T, p *unstructured.Unstructured, value string) {
	t.Helper()
	require.NoError(t, k8s.Patch(context.Background(), p, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"touched":"`+value+`"}}}`))))
}

// replicasOwners are the managers owning the Deployment's spec.replicas,
// each as manager or manager/subresource.
func replicasOwners(t *testing.T, d *appsv1.Deployment) []string {
	t.Helper()
	var owners []string
	for _, e := range d.ManagedFields {
		var set map[string]any
		require.NoError(t, json.Unmarshal(e.FieldsV1.GetRawBytes(), &set))
		spec, _ := set["f:spec"].(map[string]any)
		if _, ok := spec["f:replicas"]; ok {
			owner := e.Manager
			if e.Subresource != "" {
				owner += "/" + e.Subresource
			}
			owners = append(owners, owner)
		}
	}
	return owners
}

func eventuallyDeployment(t *testing.T, ns, name, what string, cond func(d *appsv1.Deployment) bool) *appsv1.Deployment {
	t.Helper()
	var d *appsv1.Deployment
	eventually(t, what, func(ctx context.Context) (bool, error) {
		var err error
		d, err = getDeployment(ctx, ns, name)
		return err == nil && cond(d), err
	})
	return d
}

func image(d *appsv1.Deployment) string { return d.Spec.Template.Spec.Containers[0].Image }

// TestOmittedFieldIsRemoved is why a create-only field is sent with its
// live value rather than left out of the engine's apply: server-side apply
// removes a field its manager owns and no longer sends (the Deployment's
// replicas fall back to the default, 1), and leaves one whose ownership
// another writer took.
func TestOmittedFieldIsRemoved(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	ns := namespace(t)
	deployment := func(name, image string, replicas any) *unstructured.Unstructured {
		spec := map[string]any{
			"selector": map[string]any{"matchLabels": map[string]any{"app": name}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": name}},
				"spec":     map[string]any{"containers": []any{map[string]any{"name": "web", "image": image}}},
			},
		}
		if replicas != nil {
			spec["replicas"] = replicas
		}
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec}}
		return u
	}
	apply := func(u *unstructured.Unstructured) {
		require.NoError(t, k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("omitter"), client.ForceOwnership))
	}

	apply(deployment("owned", "nginx:1", int64(3)))
	apply(deployment("owned", "nginx:2", nil))
	d, err := getDeployment(ctx, ns, "owned")
	require.NoError(t, err)
	assert.Equal(t, int32(1), *d.Spec.Replicas, "left out while its manager owns it: removed, then defaulted")

	apply(deployment("scaled", "nginx:1", int64(3)))
	scaleTo(t, ns, "scaled", 5)
	apply(deployment("scaled", "nginx:2", nil))
	d, err = getDeployment(ctx, ns, "scaled")
	require.NoError(t, err)
	assert.Equal(t, int32(5), *d.Spec.Replicas, "left out once the scale took it: kept")
}

func TestCreateOnlyReplicas(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	ns := namespace(t)

	t.Run("without the marker the engine reverts a scale", func(t *testing.T) {
		p := parent(scaledGVK, ns, "reverted", map[string]any{"createOnly": false})
		require.NoError(t, k8s.Create(ctx, p))
		eventuallyDeployment(t, ns, "reverted", "the Deployment, 3 replicas", func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 3 })
		scaleTo(t, ns, "reverted", 5)
		eventuallyDeployment(t, ns, "reverted", "replicas reverted to 3", func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 3 })
	})

	p := parent(scaledGVK, ns, "scaled", map[string]any{})
	require.NoError(t, k8s.Create(ctx, p))
	d := eventuallyDeployment(t, ns, "scaled", "the Deployment, created with the template's 3 replicas", func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 3 })
	assert.Equal(t, "spec.replicas=CreateOnly", d.Annotations[contract.AnnotationOwnership])
	settle(t)

	t.Run("a scale causes no write of the engine", func(t *testing.T) {
		scaleTo(t, ns, "scaled", 5)
		scaled, err := getDeployment(ctx, ns, "scaled")
		require.NoError(t, err)
		before := settle(t)
		for _, v := range []string{"a", "b", "c"} {
			touch(t, p, v) // reconciles with nothing to write
		}
		after := settle(t)
		assert.Equal(t, 0, delta(before, after, "deployments"), "no apply of the Deployment")
		d, err := getDeployment(ctx, ns, "scaled")
		require.NoError(t, err)
		assert.Equal(t, int32(5), *d.Spec.Replicas)
		assert.Equal(t, scaled.ResourceVersion, d.ResourceVersion, "the Deployment is as the scale left it")
		assert.Equal(t, scaled.Generation, d.Generation)
	})

	t.Run("engine diff shows the scale as left alone", func(t *testing.T) {
		tpl, ok := set.Lookup(scaledGVK)
		require.True(t, ok)
		var out strings.Builder
		d := &diff.Differ{Client: k8s, Mapper: k8s.RESTMapper(), Out: &out}
		live := p.DeepCopy()
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(p), live))
		sum, err := d.DiffKind(ctx, tpl, []*unstructured.Unstructured{live})
		require.NoError(t, err)
		assert.Equal(t, "# Scaled "+ns+"/scaled: Deployment "+ns+"/scaled: spec.replicas left alone (CreateOnly): live 5, template 3\n", out.String())
		assert.Equal(t, 1, sum.Unchanged, "no change")
		assert.Equal(t, 0, sum.Changes())
	})

	t.Run("an image change is applied and keeps the scale", func(t *testing.T) {
		before := settle(t)
		patchSpec(t, p, `{"image":"nginx:1.28"}`)
		d := eventuallyDeployment(t, ns, "scaled", "the new image", func(d *appsv1.Deployment) bool { return image(d) == "nginx:1.28" })
		after := settle(t)
		assert.Equal(t, 1, delta(before, after, "deployments"), "one apply")
		d, err := getDeployment(ctx, ns, d.Name)
		require.NoError(t, err)
		assert.Equal(t, int32(5), *d.Spec.Replicas, "the scale is kept")
		assert.Contains(t, replicasOwners(t, d), scaleManager+"/scale", "the autoscaler still owns the replicas")
	})

	t.Run("a change of the template's replicas is no reason to apply", func(t *testing.T) {
		before := settle(t)
		patchSpec(t, p, `{"replicas":4}`)
		after := settle(t)
		assert.Equal(t, 0, delta(before, after, "deployments"))
		d, err := getDeployment(ctx, ns, "scaled")
		require.NoError(t, err)
		assert.Equal(t, int32(5), *d.Spec.Replicas)
	})

	t.Run("removing the marker hands the replicas back in one write", func(t *testing.T) {
		before := settle(t)
		patchSpec(t, p, `{"createOnly":false}`)
		d := eventuallyDeployment(t, ns, "scaled", "the template's 4 replicas", func(d *appsv1.Deployment) bool { return *d.Spec.Replicas == 4 })
		after := settle(t)
		assert.Equal(t, 1, delta(before, after, "deployments"), "one apply")
		assert.NotContains(t, d.Annotations, contract.AnnotationOwnership)
		touch(t, p, "d")
		assert.Equal(t, 0, delta(after, settle(t), "deployments"), "then steady")
		assert.Equal(t, []string{contract.FieldManager}, replicasOwners(t, d), "the replicas are the engine's again")
	})
}

func TestSharedAnnotations(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	ns := namespace(t)
	for _, shared := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "shared"}[shared]
		t.Run(name, func(t *testing.T) {
			p := parent(scaledGVK, ns, name, map[string]any{"shared": shared, "annotations": map[string]any{"team": "a", "old": "x"}})
			require.NoError(t, k8s.Create(ctx, p))
			eventuallyDeployment(t, ns, name, "the Deployment", func(d *appsv1.Deployment) bool { return d.Annotations["team"] == "a" })

			// kubectl annotate: an update by another manager.
			d, err := getDeployment(ctx, ns, name)
			require.NoError(t, err)
			require.NoError(t, k8s.Patch(ctx, d, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"injected":"yes"}}}`)), client.FieldOwner("kubectl-annotate")))
			// A key the template sets, changed by another writer: the
			// template's.
			require.NoError(t, k8s.Patch(ctx, d, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"team":"b"}}}`)), client.FieldOwner("kubectl-annotate")))
			eventuallyDeployment(t, ns, name, "the template's team back", func(d *appsv1.Deployment) bool { return d.Annotations["team"] == "a" })

			// A spec change forces an apply; the template no longer sets
			// "old", which only the engine's apply owns (as a key a mutating
			// webhook adds to the engine's own request would be).
			patchSpec(t, p, `{"image":"nginx:1.28","annotations":{"old":null}}`)
			d = eventuallyDeployment(t, ns, name, "the new image", func(d *appsv1.Deployment) bool { return image(d) == "nginx:1.28" })
			assert.Equal(t, "yes", d.Annotations["injected"], "another writer's key survives the engine's apply")
			assert.Equal(t, "a", d.Annotations["team"])
			if shared {
				assert.Equal(t, "x", d.Annotations["old"], "Shared: the engine removes no key")
				assert.Equal(t, "metadata.annotations=Shared,spec.replicas=CreateOnly", d.Annotations[contract.AnnotationOwnership])
			} else {
				assert.NotContains(t, d.Annotations, "old", "a key only the engine owned, no longer in the template: removed")
			}
			settle(t)
			d, err = getDeployment(ctx, ns, name)
			require.NoError(t, err)
			assert.Equal(t, "yes", d.Annotations["injected"])
			keys := make([]string, 0, len(d.Annotations))
			for k := range d.Annotations {
				if !strings.HasPrefix(k, "engine.cuengine.dev/") {
					keys = append(keys, k)
				}
			}
			assert.ElementsMatch(t, map[bool][]string{false: {"team", "injected"}, true: {"team", "injected", "old"}}[shared], keys)
		})
	}
}
