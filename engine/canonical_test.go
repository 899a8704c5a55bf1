package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/cuengine/engine/contract"
)

var canonicalGVK = schema.GroupVersionKind{Group: "test.cuengine.dev", Version: "v1", Kind: "Canonical"}

// applyVerb is the verb of a server-side apply in the apiserver's counters.
var applyVerb = map[string]bool{"APPLY": true}

// reconciles returns how many reconciles of a kind its controller has
// finished, whatever their result.
func reconciles(t *testing.T, gvk schema.GroupVersionKind) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	require.NoError(t, err)
	name := "engine-" + strings.ToLower(contract.KindString(gvk))
	n := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == name {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// reconciled runs trigger and waits until the kind's controller has
// finished a reconcile since, then until the writes settle.
func reconciled(t *testing.T, gvk schema.GroupVersionKind, trigger func()) {
	t.Helper()
	before := reconciles(t, gvk)
	trigger()
	eventually(t, "a reconcile", func(context.Context) (bool, error) { return reconciles(t, gvk) > before, nil })
	settle(t)
}

// TestCanonicalValuesConverge: a child whose valid values the apiserver
// stores in another form (0.5 CPU as "500m", 1 as "1", "1024Mi" as "1Gi";
// args: [], an env entry's value: "", hostNetwork: false and annotations: {}
// dropped) is applied once, and the parent is Synced and Ready with its
// observedGeneration; re-reconciles, after the child changed or not, apply
// nothing more. A real drift, replicas changed by another manager, is
// repaired with one apply.
func TestCanonicalValuesConverge(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	ns := namespace(t)
	appliesBefore, dryRunsBefore := requests(t, applyVerb), dryRuns(t, applyVerb)
	applies := func() int { return delta(appliesBefore, requests(t, applyVerb), "deployments") }
	checks := func() int { return delta(dryRunsBefore, dryRuns(t, applyVerb), "deployments") }

	c := parent(canonicalGVK, ns, "canonical", map[string]any{})
	require.NoError(t, k8s.Create(ctx, c))
	eventually(t, "Synced", func(ctx context.Context) (bool, error) {
		s, err := condition(ctx, c, contract.ConditionSynced)
		return s != nil && s.Status == metav1.ConditionTrue, err
	})
	settle(t)
	d, err := getDeployment(ctx, ns, "canonical")
	require.NoError(t, err)
	res := d.Spec.Template.Spec.Containers[0].Resources
	require.Equal(t, "500m", res.Requests.Cpu().String(), "the apiserver stores 0.5 CPU as 500m")
	require.Equal(t, "1Gi", res.Limits.Memory().String(), "the apiserver stores 1024Mi as 1Gi")
	require.Nil(t, d.Spec.Template.Spec.Containers[0].Args, "the apiserver drops args: []")
	assert.Equal(t, 1, applies(), "one apply: the create")
	assert.Equal(t, 0, checks(), "the engine knows the object its create made: no dry run")

	t.Run("Ready with its observedGeneration once the Deployment is", func(t *testing.T) {
		reconciled(t, canonicalGVK, func() { markReady(t, ns, "canonical", 1) })
		eventually(t, "Ready", func(ctx context.Context) (bool, error) {
			s, err := condition(ctx, c, contract.ConditionReady)
			return s != nil && s.Status == metav1.ConditionTrue, err
		})
		cur := &unstructured.Unstructured{}
		cur.SetGroupVersionKind(canonicalGVK)
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(c), cur))
		gen, _, _ := unstructured.NestedInt64(cur.Object, "status", "observedGeneration")
		assert.Equal(t, cur.GetGeneration(), gen)
		assert.Equal(t, 1, applies(), "no apply after the create")
		assert.Equal(t, 1, checks(), "one dry run: the child's status changed it")
	})

	t.Run("re-reconciles apply nothing", func(t *testing.T) {
		for _, label := range []string{"a", "b", "c"} {
			reconciled(t, canonicalGVK, func() {
				require.NoError(t, k8s.Patch(ctx, c, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"round":"`+label+`"}}}`))))
			})
		}
		reconciled(t, canonicalGVK, func() {
			require.NoError(t, k8s.Patch(ctx, d, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"note":"x"}}}`))))
		})
		// A Deployment's generation counts its annotations too: its
		// controller (none runs here) observes the new one.
		reconciled(t, canonicalGVK, func() { markReady(t, ns, "canonical", 1) })
		reconciled(t, canonicalGVK, func() {
			require.NoError(t, k8s.Patch(ctx, c, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"round":"d"}}}`))))
		})
		assert.Equal(t, 1, applies(), "still the create only")
		assert.Equal(t, 3, checks(), "a dry run per new version of the child (the annotation, its status); none for the same version again")
		s, err := condition(ctx, c, contract.ConditionReady)
		require.NoError(t, err)
		assert.Equal(t, metav1.ConditionTrue, s.Status, s.Message)
	})

	t.Run("a real drift is repaired", func(t *testing.T) {
		scaled := []byte(`{"spec":{"replicas":3}}`)
		reconciled(t, canonicalGVK, func() {
			require.NoError(t, k8s.Patch(ctx, d, client.RawPatch("application/merge-patch+json", scaled), client.FieldOwner("someone-else")))
		})
		eventually(t, "replicas back to 1", func(ctx context.Context) (bool, error) {
			cur, err := getDeployment(ctx, ns, "canonical")
			return err == nil && *cur.Spec.Replicas == 1, err
		})
		settle(t)
		assert.Equal(t, 2, applies(), "one apply repairs the drift")
		assert.Equal(t, 4, checks(), "found by one dry run")
	})
}
