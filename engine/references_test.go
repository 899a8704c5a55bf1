package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/templates"
)

// testOwner is the field manager of the test's own writes: the engine's
// manager, in the same process, writes as the binary's name.
var testOwner = client.FieldOwner("reference-test")

var consumerGVK = schema.GroupVersionKind{Group: "test.cuengine.dev", Version: "v1", Kind: "Consumer"}

// referenceFacts is what the engine must never change on a referenced
// object: everything but its data, which only the test writes.
type referenceFacts struct {
	resourceVersion string
	labels          map[string]string
	annotations     map[string]string
	owners          []metav1.OwnerReference
	finalizers      []string
	managers        []string
}

func factsOf(obj client.Object) referenceFacts {
	f := referenceFacts{resourceVersion: obj.GetResourceVersion(), labels: obj.GetLabels(), annotations: obj.GetAnnotations(),
		owners: obj.GetOwnerReferences(), finalizers: obj.GetFinalizers()}
	for _, m := range obj.GetManagedFields() {
		f.managers = append(f.managers, m.Manager)
	}
	return f
}

func getConfigMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	return cm, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cm)
}

// syncedReason waits until the parent's Synced condition has the reason
// and a message containing each of parts, and returns the condition.
func waitSynced(t *testing.T, obj *unstructured.Unstructured, status metav1.ConditionStatus, reason string, parts ...string) *metav1.Condition {
	t.Helper()
	var got *metav1.Condition
	eventually(t, "Synced="+string(status)+" "+reason, func(ctx context.Context) (bool, error) {
		c, err := condition(ctx, obj, contract.ConditionSynced)
		if err != nil || c == nil || c.Status != status || c.Reason != reason {
			return false, err
		}
		for _, p := range parts {
			if !strings.Contains(c.Message, p) {
				return false, nil
			}
		}
		got = c
		return true, nil
	})
	return got
}

// TestReferenceLifecycle: a template reads a ConfigMap it does not own.
// Missing, it creates nothing and names it; once it exists its value
// reaches the child, and a change of it within seconds; gone again, the
// child is kept; and through it all, and the parent's deletion, the
// engine never writes the ConfigMap.
func TestReferenceLifecycle(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	ns := namespace(t)
	consumer := parent(consumerGVK, ns, "c1", map[string]any{"settings": "team-settings", "team": "a"})
	require.NoError(t, k8s.Create(ctx, consumer))

	// Missing: nothing is created, and the condition names the object.
	waitSynced(t, consumer, metav1.ConditionFalse, contract.ReasonReferenceNotFound, "ConfigMap "+ns+"/team-settings (references.settings)")
	ready, err := condition(ctx, consumer, contract.ConditionReady)
	require.NoError(t, err)
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
	assert.Equal(t, contract.ReasonReferenceNotFound, ready.Reason)
	_, err = getConfigMap(ctx, ns, "c1-app")
	assert.True(t, apierrors.IsNotFound(err), "no child while a reference is missing: %v", err)
	events := &corev1.EventList{}
	require.NoError(t, k8s.List(ctx, events, client.InNamespace(ns)))
	found := false
	for _, e := range events.Items {
		found = found || (e.Reason == contract.ReasonReferenceNotFound && e.Type == corev1.EventTypeWarning && e.InvolvedObject.Name == "c1")
	}
	assert.True(t, found, "a Warning event ReferenceNotFound on the parent")

	// It appears: its value reaches the child, through the watch.
	peer := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "peer-b", Labels: map[string]string{"team": "a"}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	require.NoError(t, k8s.Create(ctx, peer))
	settings := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team-settings", Labels: map[string]string{"team": "a"}},
		Data: map[string]string{"greeting": "hello"}}
	require.NoError(t, k8s.Create(ctx, settings, testOwner))
	start := time.Now()
	eventuallyWithin(t, "the child with the referenced value", 10*time.Second, func(ctx context.Context) (bool, error) {
		cm, err := getConfigMap(ctx, ns, "c1-app")
		return err == nil && cm.Data["greeting"] == "hello" && cm.Data["peers"] == "peer-b", client.IgnoreNotFound(err)
	})
	t.Logf("reference appeared -> child created: %s", time.Since(start).Round(time.Millisecond))
	waitSynced(t, consumer, metav1.ConditionTrue, contract.ReasonSynced)

	// A change of it reaches the child within seconds.
	settings.Data["greeting"] = "hi"
	require.NoError(t, k8s.Update(ctx, settings, testOwner))
	written := factsOf(settings)
	start = time.Now()
	eventuallyWithin(t, "the changed value in the child", 10*time.Second, func(ctx context.Context) (bool, error) {
		cm, err := getConfigMap(ctx, ns, "c1-app")
		return err == nil && cm.Data["greeting"] == "hi", err
	})
	t.Logf("reference changed -> child updated: %s", time.Since(start).Round(time.Millisecond))

	// A selected object appearing reaches it too, sorted by name.
	require.NoError(t, k8s.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "peer-a", Labels: map[string]string{"team": "a"}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}))
	eventuallyWithin(t, "both peers in the child", 10*time.Second, func(ctx context.Context) (bool, error) {
		cm, err := getConfigMap(ctx, ns, "c1-app")
		return err == nil && cm.Data["peers"] == "peer-a,peer-b", err
	})
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(settings), settings))
	assert.Equal(t, written, factsOf(settings), "the engine wrote the referenced ConfigMap")
	child, err := getConfigMap(ctx, ns, "c1-app")
	require.NoError(t, err)

	// Gone: the child is kept as it is, and the condition says so.
	require.NoError(t, k8s.Delete(ctx, settings))
	waitSynced(t, consumer, metav1.ConditionFalse, contract.ReasonReferenceNotFound, "ConfigMap "+ns+"/team-settings", "the 1 existing children are kept as they are")
	kept, err := getConfigMap(ctx, ns, "c1-app")
	require.NoError(t, err, "a reference that disappears deletes nothing")
	assert.Equal(t, child.ResourceVersion, kept.ResourceVersion, "nor changes anything")

	// Back: the reconcile resumes.
	settings = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team-settings", Labels: map[string]string{"team": "a"}},
		Data: map[string]string{"greeting": "welcome back"}}
	require.NoError(t, k8s.Create(ctx, settings, testOwner))
	eventuallyWithin(t, "the returned value in the child", 10*time.Second, func(ctx context.Context) (bool, error) {
		cm, err := getConfigMap(ctx, ns, "c1-app")
		return err == nil && cm.Data["greeting"] == "welcome back", err
	})
	waitSynced(t, consumer, metav1.ConditionTrue, contract.ReasonSynced)

	// The parent's deletion neither waits for nor touches the reference.
	require.NoError(t, k8s.Delete(ctx, consumer))
	eventually(t, "the parent gone", func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(consumer), &unstructured.Unstructured{Object: map[string]any{"apiVersion": "test.cuengine.dev/v1", "kind": "Consumer"}})
		return apierrors.IsNotFound(err), nil
	})
	after, err := getConfigMap(ctx, ns, "team-settings")
	require.NoError(t, err)
	assert.Equal(t, factsOf(settings), factsOf(after), "the referenced ConfigMap's resourceVersion and metadata are untouched")
	assert.Equal(t, []string{"reference-test"}, factsOf(after).managers, "only the test ever wrote it")
	assert.Empty(t, after.OwnerReferences)
	assert.NotContains(t, after.Labels, contract.LabelManagedBy)
}

// TestReferenceCrossNamespace: a reference into another namespace is
// refused unless the policy lists it, and then read.
func TestReferenceCrossNamespace(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	ns := namespace(t)
	for _, name := range []string{"shared-settings", "elsewhere"} {
		require.NoError(t, client.IgnoreAlreadyExists(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})))
		require.NoError(t, client.IgnoreAlreadyExists(k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "global"},
			Data: map[string]string{"greeting": "from " + name}}, testOwner)))
	}

	refused := parent(consumerGVK, ns, "refused", map[string]any{"settings": "global", "namespace": "elsewhere"})
	require.NoError(t, k8s.Create(ctx, refused))
	waitSynced(t, refused, metav1.ConditionFalse, contract.ReasonReferenceRefused,
		`reference settings: ConfigMap elsewhere/global is in namespace "elsewhere", which the template's policy.crossNamespace does not list (shared-settings)`)
	_, err := getConfigMap(ctx, ns, "refused-app")
	assert.True(t, apierrors.IsNotFound(err), "nothing is created for a refused reference: %v", err)

	allowed := parent(consumerGVK, ns, "allowed", map[string]any{"settings": "global", "namespace": "shared-settings"})
	require.NoError(t, k8s.Create(ctx, allowed))
	eventually(t, "the child with the shared value", func(ctx context.Context) (bool, error) {
		cm, err := getConfigMap(ctx, ns, "allowed-app")
		return err == nil && cm.Data["greeting"] == "from shared-settings", client.IgnoreNotFound(err)
	})
}

// lookout templates reference one object: a Secret, then (after a reload)
// a ConfigMap.
const lookoutHead = `package lookout

parent: {apiVersion: "lookout.cuengine.dev/v1", kind: "Lookout"}
children: seen: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: parent.metadata.name + "-seen"
	data: seen: observed.watched.metadata.name
}
`

var lookoutGVK = schema.GroupVersionKind{Group: "lookout.cuengine.dev", Version: "v1", Kind: "Lookout"}

// TestReferenceInformersFollowTheTemplates: the informers of referenced
// objects start with the first parent that reads them (none for a template
// without parents), move with a reload (the child follows the new
// reference) and stop when the template is removed (its kind then only
// finishes deletions, which read none).
func TestReferenceInformersFollowTheTemplates(t *testing.T) {
	controlPlane(t)
	dir := t.TempDir()
	load := func(ref string) *templates.Set {
		t.Helper()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "lookout.cue"), []byte(lookoutHead+ref), 0o644))
		set, err := templates.Load(dir)
		require.NoError(t, err)
		return set
	}
	secretKind := schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	configMapKind := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	first := load(`references: watched: {apiVersion: "v1", kind: "Secret", metadata: name: "s"}`)
	lookout, ok := first.Lookup(lookoutGVK)
	require.True(t, ok)
	installCRD(t, lookout.CRD())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	require.NoError(t, err)
	ns := namespace(t)
	eng, err := engine.New(mgr, engine.Options{RevisionNamespace: ns})
	require.NoError(t, err)
	eng.SetTemplates(first)
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	defer func() { cancel(); <-done }()
	watching := func(want ...schema.GroupVersionKind) {
		t.Helper()
		eventually(t, fmt.Sprintf("watching %v", want), func(context.Context) (bool, error) {
			return slices.Equal(eng.ReferenceKinds(lookoutGVK), want), nil
		})
	}
	watching() // no parent reads anything yet

	require.NoError(t, k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s"}}, testOwner))
	require.NoError(t, k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}}, testOwner))
	require.NoError(t, k8s.Create(ctx, parent(lookoutGVK, ns, "l", map[string]any{})))
	seen := func(want string) {
		t.Helper()
		eventually(t, "the child seeing "+want, func(ctx context.Context) (bool, error) {
			cm, err := getConfigMap(ctx, ns, "l-seen")
			return err == nil && cm.Data["seen"] == want, client.IgnoreNotFound(err)
		})
	}
	seen("s")
	watching(secretKind)
	assert.Equal(t, 1, eng.ReferenceObjects(), "the one Secret named")

	eng.SetTemplates(load(`references: watched: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "c"}`))
	watching(configMapKind)
	seen("c")

	empty, err := templates.Load(t.TempDir())
	require.NoError(t, err)
	eng.SetTemplates(empty)
	watching() // retired: no referenced kind watched
}
