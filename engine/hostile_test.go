package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/internal/gcsemulator"
	"github.com/cuengine/engine/providers"
	"github.com/cuengine/engine/providers/gcs"
	"github.com/cuengine/engine/templates"
)

var (
	gcsGVK        = schema.GroupVersionKind{Group: "storage.matsumo.dev", Version: "v1", Kind: "Gcs"}
	storefrontGVK = schema.GroupVersionKind{Group: "apps.cuengine.dev", Version: "v1", Kind: "Storefront"}
)

// hostileValues are what a namespace user may send in a field: the
// boundaries, the wrong types, the unprintable and the huge.
func hostileValues(r *rand.Rand) []any {
	deep := map[string]any{"leaf": "x"}
	for range 40 {
		deep = map[string]any{"d": deep}
	}
	return []any{
		"", "a", "ab", "abc", strings.Repeat("a", 54), strings.Repeat("a", 55), strings.Repeat("x", 200_000),
		"UPPER-case", "bücket-ñame", "name\u202egnp.exe", "nul\x00byte", "tab\tand\nnewline", "emoji-🪣-bucket",
		"-leading-dash", "trailing-dash-", "dots..in..name", "goog-reserved", "192.168.1.1", "ends.with.dot.",
		int64(-1), int64(0), int64(1), int64(2147483647), int64(2147483648), int64(-2147483649), int64(1) << 62,
		1.5, true, false, nil, []any{"a", int64(1)}, map[string]any{"nested": "value"}, deep,
		fmt.Sprintf("rand-%d", r.Int64()),
	}
}

// hostileSpecs builds specs for a kind from its fields: each field set to
// each hostile value with the others valid, and some wholly random ones.
func hostileSpecs(r *rand.Rand, valid map[string]any) []map[string]any {
	values := hostileValues(r)
	var out []map[string]any
	for field := range valid {
		for _, v := range values {
			spec := map[string]any{}
			for k, vv := range valid {
				spec[k] = vv
			}
			spec[field] = v
			out = append(out, spec)
		}
	}
	for range 20 {
		spec := map[string]any{"unknownField": values[r.IntN(len(values))]}
		for k := range valid {
			spec[k] = values[r.IntN(len(values))]
		}
		out = append(out, spec)
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// TestHostileSpecs sends the example templates' kinds (Gcs, Storefront,
// MyKind) specs designed to hurt, through the real apiserver, with the real GCS provider against the
// emulator, and checks what must hold whatever the input: the engine does
// not panic and keeps serving, no child lands outside the template's
// policy, every parent the apiserver accepted gets a Synced condition, a
// refusal says why in printable text, and every parent can be deleted.
func TestHostileSpecs(t *testing.T) {
	controlPlane(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	dir := t.TempDir()
	require.NoError(t, os.CopyFS(filepath.Join(dir, "storefront"), os.DirFS("../examples/templates/storefront")))
	b, err := os.ReadFile("../examples/templates/gcs.cue")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gcs.cue"), b, 0o644))
	set, err := templates.Load(dir)
	require.NoError(t, err)
	for _, tm := range set.Templates() {
		installCRD(t, tm.CRD())
	}

	emu, err := gcsemulator.Start(gcsemulator.Options{})
	require.NoError(t, err)
	defer emu.Stop()
	t.Setenv("STORAGE_EMULATOR_HOST", emu.Host())
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
	p, err := gcs.New(ctx, gcs.Options{CallTimeout: 10 * time.Second})
	require.NoError(t, err)
	defer p.Close()
	reg := providers.NewRegistry()
	reg.Register(gcs.Name, p)

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	require.NoError(t, err)
	eng, err := engine.New(mgr, engine.Options{Providers: reg, MaxConcurrentReconciles: 4})
	require.NoError(t, err)
	eng.SetTemplates(set)
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	defer func() { cancel(); <-done }()

	r := rand.New(rand.NewPCG(1, 2)) // fixed: a failure can be replayed
	ns := namespace(t)
	valid := map[schema.GroupVersionKind]map[string]any{
		gcsGVK:        {"projectID": "p", "bucketName": "hostile", "location": "US", "storageClass": "STANDARD", "versioning": false, "forceDestroy": true, "deletionPolicy": "Delete"},
		storefrontGVK: {"projectID": "p", "bucketName": "assets", "image": "nginx:1", "replicas": int64(1)},
		// MyKind is served by the package's engine, from the same template
		// as examples/templates/mykind.cue.
		myKindGVK: {"deploymentName": "web", "replicas": int64(1)},
	}
	var accepted []*unstructured.Unstructured
	refused := 0
	for gvk, spec := range valid {
		for i, s := range hostileSpecs(r, spec) {
			obj := parent(gvk, ns, fmt.Sprintf("%s-%d", strings.ToLower(gvk.Kind), i), s)
			if err := k8s.Create(ctx, obj); err != nil {
				require.True(t, apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsRequestEntityTooLargeError(err),
					"the apiserver refuses a spec only as invalid: %v", err)
				refused++
				continue
			}
			accepted = append(accepted, obj)
		}
	}
	t.Logf("%d specs accepted by the apiserver, %d refused by the schema", len(accepted), refused)
	require.NotEmpty(t, accepted)

	canary := parent(storefrontGVK, ns, "canary", valid[storefrontGVK])
	require.NoError(t, k8s.Create(ctx, canary))
	accepted = append(accepted, canary)

	eventuallyWithin(t, "every accepted parent reconciled", 3*time.Minute, func(ctx context.Context) (bool, error) {
		for _, obj := range accepted {
			cur := &unstructured.Unstructured{}
			cur.SetGroupVersionKind(obj.GroupVersionKind())
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
				return false, err
			}
			gen, _, _ := unstructured.NestedInt64(cur.Object, "status", "observedGeneration")
			if gen != cur.GetGeneration() {
				return false, fmt.Errorf("%s %s not reconciled yet", obj.GetKind(), obj.GetName())
			}
		}
		return true, nil
	})
	for _, obj := range accepted {
		c, err := condition(ctx, obj, contract.ConditionSynced)
		require.NoError(t, err)
		require.NotNil(t, c, "%s %s has a Synced condition", obj.GetKind(), obj.GetName())
		if c.Status != metav1.ConditionTrue {
			assert.NotEmpty(t, c.Reason, "%s: a refusal has a reason", obj.GetName())
			assert.NotEmpty(t, c.Message, "%s: a refusal has a message", obj.GetName())
		}
		assert.True(t, printable(c.Message), "%s: the message is printable: %q", obj.GetName(), c.Message)
	}
	c, err := condition(ctx, canary, contract.ConditionSynced)
	require.NoError(t, err)
	assert.Equal(t, metav1.ConditionTrue, c.Status, "a valid parent of the same kinds is still served: %s", c.Message)

	ours := map[string]bool{}
	for _, obj := range accepted {
		ours[string(obj.GetUID())] = true
	}
	var deployments appsv1.DeploymentList
	require.NoError(t, k8s.List(ctx, &deployments, client.HasLabels{contract.LabelParentUID}))
	for _, d := range deployments.Items {
		if !ours[d.Labels[contract.LabelParentUID]] {
			continue // another test's
		}
		assert.Equal(t, ns, d.Namespace, "no child outside the parent's namespace")
		assert.NotNil(t, metav1.GetControllerOf(&d), "every child is owned")
	}

	for _, obj := range accepted {
		require.NoError(t, client.IgnoreNotFound(k8s.Delete(ctx, obj)))
	}
	eventuallyWithin(t, "every parent deleted", 3*time.Minute, func(ctx context.Context) (bool, error) {
		if err := collectForeground(ctx, ns); err != nil {
			return false, err
		}
		for _, obj := range accepted {
			cur := &unstructured.Unstructured{}
			cur.SetGroupVersionKind(obj.GroupVersionKind())
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), cur); !apierrors.IsNotFound(err) {
				return false, fmt.Errorf("%s %s still there (finalizers %v)", obj.GetKind(), obj.GetName(), cur.GetFinalizers())
			}
		}
		return true, nil
	})
}

// collectForeground does the garbage collector's part of the foreground
// deletions the engine sends (a Storefront's Deployment goes before its
// bucket), which envtest, without kube-controller-manager, never finishes:
// a Deployment being deleted, with no ReplicaSet here to wait for, loses
// its foregroundDeletion finalizer.
func collectForeground(ctx context.Context, ns string) error {
	var deployments appsv1.DeploymentList
	if err := k8s.List(ctx, &deployments, client.InNamespace(ns)); err != nil {
		return err
	}
	for i := range deployments.Items {
		d := &deployments.Items[i]
		if d.DeletionTimestamp == nil || !slices.Contains(d.Finalizers, metav1.FinalizerDeleteDependents) {
			continue
		}
		patch := client.MergeFrom(d.DeepCopy())
		d.Finalizers = slices.DeleteFunc(d.Finalizers, func(f string) bool { return f == metav1.FinalizerDeleteDependents })
		if err := k8s.Patch(ctx, d, patch); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// printable reports text without control or bidirectional formatting
// characters.
func printable(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return false
		}
	}
	return true
}
