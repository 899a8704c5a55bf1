package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/templates"
)

// TestKstatusTellsFailingFromProgressing reads real parents with kstatus
// itself (sigs.k8s.io/cli-utils/pkg/kstatus/status.Compute, what Flux's
// health checks and kubectl-style waiting use): InProgress while the
// engine converges (a child not ready yet, a referenced object missing:
// retryable, never Failed), Current once Ready, Failed with the reason on
// a problem only a person can clear (a child that belongs to someone
// else).
func TestKstatusTellsFailingFromProgressing(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	ns := namespace(t)
	compute := func(obj *unstructured.Unstructured) func(ctx context.Context) (*kstatus.Result, error) {
		return func(ctx context.Context) (*kstatus.Result, error) {
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(obj.GroupVersionKind())
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), live); err != nil {
				return nil, err
			}
			return kstatus.Compute(live)
		}
	}
	statusIs := func(obj *unstructured.Unstructured, want kstatus.Status, reason string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			if c, err := condition(ctx, obj, contract.ConditionSynced); err != nil || c == nil {
				return false, err // not reconciled yet: kstatus says InProgress for nothing
			}
			res, err := compute(obj)(ctx)
			if err != nil {
				return false, err
			}
			if res.Status == kstatus.FailedStatus && want != kstatus.FailedStatus {
				t.Fatalf("%s is Failed on a retryable state: %s", obj.GetName(), res.Message)
			}
			if res.Status != want {
				return false, nil
			}
			stalled, err := condition(ctx, obj, contract.ConditionStalled)
			if want != kstatus.FailedStatus {
				return err == nil && stalled == nil, err // only a True one is stored
			}
			return err == nil && stalled != nil && stalled.Reason == reason, err
		}
	}

	// Converging: the Deployment is not ready (the bare control plane has
	// no controller for it), then it is.
	w := parent(waiterGVK, ns, "web", map[string]any{"expose": false})
	require.NoError(t, k8s.Create(ctx, w))
	eventually(t, "InProgress while the Deployment is not ready", statusIs(w, kstatus.InProgressStatus, ""))
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(waiterGVK)
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(w), live))
	rec := contract.FindCondition(live, contract.ConditionReconciling)
	require.NotNil(t, rec)
	assert.Equal(t, metav1.ConditionTrue, rec.Status)
	assert.Equal(t, live.GetGeneration(), rec.ObservedGeneration)
	markReady(t, ns, "web", 1)
	eventually(t, "Current once Ready", statusIs(w, kstatus.CurrentStatus, ""))
	gone, err := condition(ctx, w, contract.ConditionReconciling)
	require.NoError(t, err)
	assert.Nil(t, gone, "Reconciling goes once Ready")

	// Waiting for a referenced ConfigMap: retryable, InProgress.
	c := parent(consumerGVK, ns, "waits", map[string]any{"settings": "not-yet"})
	require.NoError(t, k8s.Create(ctx, c))
	eventually(t, "InProgress while a reference is missing", statusIs(c, kstatus.InProgressStatus, ""))

	// A Deployment of the same name that belongs to no parent: only a
	// person can settle it.
	foreign := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "taken"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "taken"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
	}
	require.NoError(t, k8s.Create(ctx, foreign))
	conflict := parent(waiterGVK, ns, "taken", map[string]any{"expose": false})
	require.NoError(t, k8s.Create(ctx, conflict))
	eventually(t, "Failed on ChildConflict", statusIs(conflict, kstatus.FailedStatus, contract.ReasonChildConflict))
	res, err := compute(conflict)(ctx)
	require.NoError(t, err)
	synced, err := condition(ctx, conflict, contract.ConditionSynced)
	require.NoError(t, err)
	assert.Equal(t, synced.Message, res.Message, "kstatus shows the engine's message")
	rec, err = condition(ctx, conflict, contract.ConditionReconciling)
	require.NoError(t, err)
	assert.Nil(t, rec, "no Reconciling while Stalled")
}

var beaconGVK = schema.GroupVersionKind{Group: "kstatus.cuengine.dev", Version: "v1", Kind: "Beacon"}

// beaconTemplate: a ConfigMap that carries spec.note, and a ClusterRole,
// which cannot carry an owner reference, so the parent has the engine's
// finalizer and its deletion waits for the engine.
const beaconTemplate = `parent: {apiVersion: "kstatus.cuengine.dev/v1", kind: "Beacon", spec: note: *"" | string}
policy: clusterScoped: true
children: {
	note: {
		apiVersion: "v1"
		kind:       "ConfigMap"
		metadata: name: parent.metadata.name
		data: note: parent.spec.note
	}
	role: {
		apiVersion: "rbac.authorization.k8s.io/v1"
		kind:       "ClusterRole"
		metadata: name: "beacon-" + parent.metadata.namespace + "-" + parent.metadata.name
		rules: []
	}
}
`

// TestKstatusFromTheFirstMoment follows one parent through its life with
// kstatus (cli-utils' status.Compute), the engine stopped and started
// around each step, so that each step is seen before the engine acts on
// it: created while no engine runs, InProgress (before the CRD's status
// default, Current: no status, no conditions); Current once handled; a
// spec change the engine has not seen, InProgress; paused, Failed (the
// pause is Stalled: only a person lifts it), and a spec change while
// paused, InProgress; deleted, Terminating while the finalizer waits for
// the engine, then gone.
func TestKstatusFromTheFirstMoment(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "beacon.cue"), []byte(beaconTemplate), 0o644))
	beacons, err := templates.Load(dir)
	require.NoError(t, err)
	tpl, ok := beacons.Lookup(beaconGVK)
	require.True(t, ok)
	installCRD(t, tpl.CRD())
	ns := namespace(t)

	// run starts an engine of beacons alone and returns its stop.
	run := func() (stop func()) {
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", MapperProvider: engine.NewRESTMapper})
		require.NoError(t, err)
		eng, err := engine.New(mgr, engine.Options{RevisionNamespace: ns})
		require.NoError(t, err)
		eng.SetTemplates(beacons)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- mgr.Start(ctx) }()
		return func() { cancel(); require.NoError(t, <-done) }
	}
	b := parent(beaconGVK, ns, "b", map[string]any{"note": "one"})
	compute := func() *kstatus.Result {
		t.Helper()
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(beaconGVK)
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(b), live))
		res, err := kstatus.Compute(live)
		require.NoError(t, err)
		return res
	}
	is := func(want kstatus.Status) func(context.Context) (bool, error) {
		return func(context.Context) (bool, error) { return compute().Status == want, nil }
	}
	noteIs := func(note string) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			cm := &corev1.ConfigMap{}
			err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "b"}, cm)
			return err == nil && cm.Data["note"] == note, client.IgnoreNotFound(err)
		}
	}
	setSpec := func(note string) {
		t.Helper()
		patch := []byte(`{"spec":{"note":"` + note + `"}}`)
		require.NoError(t, k8s.Patch(ctx, b, client.RawPatch(types.MergePatchType, patch)))
	}

	// Created while no engine runs.
	require.NoError(t, k8s.Create(ctx, b))
	res := compute()
	assert.Equal(t, kstatus.InProgressStatus, res.Status, "a parent the engine has not handled: %s", res.Message)
	t.Logf("created, no engine: %s: %s", res.Status, res.Message)

	stop := run()
	eventually(t, "Current once handled", is(kstatus.CurrentStatus))
	eventually(t, "the ConfigMap", noteIs("one"))
	stop()

	// A spec change the engine has not seen.
	setSpec("two")
	res = compute()
	assert.Equal(t, kstatus.InProgressStatus, res.Status, "a change not yet seen: %s", res.Message)
	stop = run()
	eventually(t, "Current once the change is applied", is(kstatus.CurrentStatus))
	eventually(t, "the ConfigMap follows", noteIs("two"))

	// Paused: Failed, as Stalled says; a change made while paused is
	// InProgress, the generation not observed.
	require.NoError(t, k8s.Patch(ctx, b, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+contract.AnnotationPaused+`":"true"}}}`))))
	eventually(t, "Failed while paused", is(kstatus.FailedStatus))
	setSpec("three")
	eventually(t, "InProgress on a change made while paused", is(kstatus.InProgressStatus))
	require.NoError(t, k8s.Patch(ctx, b, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+contract.AnnotationPaused+`":null}}}`))))
	eventually(t, "Current once resumed", is(kstatus.CurrentStatus))
	eventually(t, "the ConfigMap follows the change made while paused", noteIs("three"))
	stop()

	// Deleted while no engine runs: the finalizer holds it, Terminating.
	require.NoError(t, k8s.Delete(ctx, b))
	res = compute()
	assert.Equal(t, kstatus.TerminatingStatus, res.Status, "deleted, the finalizer waiting: %s", res.Message)
	stop = run()
	defer stop()
	eventually(t, "the parent gone", func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(b), &unstructured.Unstructured{Object: map[string]any{"apiVersion": beaconGVK.GroupVersion().String(), "kind": beaconGVK.Kind}})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}
