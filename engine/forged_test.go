package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/clusters"
	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/templates"
)

// TestForgedRemoteChildIsAConflict (issue 52, item 2): someone who may
// write in a workload cluster, and read the parent, pre-creates the
// objects a parent's children will take there once the parent moves in
// (from a cluster not registered, "later", to w1), with the engine's
// labels, the parent's UID and a container of their own. Labels and the
// inventory prove nothing the engine did not create: the parent is
// ChildConflict, the forged objects are neither applied over nor deleted
// with the parent, as a local child in the same case.
func TestForgedRemoteChildIsAConflict(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	ns := namespace(t)
	w1, wk := startWorkload(t)
	kubeconfig, err := os.ReadFile(w1.Kubeconfig)
	require.NoError(t, err)
	clusterSecret(t, ns, "w1", kubeconfig)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)

	dir := t.TempDir()
	src := strings.Replace(strings.ReplaceAll(placementTemplate, "Placement", "Forged"), `clusters: ["west"]`, `clusters: ["later", "w1"]`, 1)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "forged.cue"), []byte(src), 0o644))
	set, err := templates.Load(dir)
	require.NoError(t, err)
	runEngine(t, set, engine.Options{InstallCRDs: true, ResourceResync: 10 * time.Minute, Clusters: clusters.Secrets{Client: cs.CoreV1(), Namespace: ns}, ClusterProbeEvery: 500 * time.Millisecond})

	gvk := schema.GroupVersionKind{Group: "multi.cuengine.dev", Version: "v1", Kind: "Forged"}
	const name = "victim"
	p := parent(gvk, ns, name, map[string]any{"cluster": "later"})
	eventually(t, "the Forged CRD served", func(ctx context.Context) (bool, error) {
		err := k8s.Create(ctx, p.DeepCopy())
		return err == nil, err
	})
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), p.DeepCopy()) })
	waitReason(t, p, contract.ReasonClusterUnknown)
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(gvk)
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(p), live))

	// The forger's objects, labelled as the engine labels its children.
	labels := func(child string) map[string]string {
		return map[string]string{contract.LabelManagedBy: contract.ManagedByValue, contract.LabelParentUID: string(live.GetUID()), contract.LabelChild: child}
	}
	annotations := map[string]string{contract.AnnotationCluster: "w1"}
	forger := client.FieldOwner("kubectl-create")
	require.NoError(t, wk.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels("ns"), Annotations: annotations}}, forger))
	forged := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "app", Labels: labels("app"), Annotations: annotations},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "app"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "app"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "sidecar", Image: "forger/sidecar"}}},
			},
		},
	}
	require.NoError(t, wk.Create(ctx, forged, forger))

	require.NoError(t, k8s.Patch(ctx, p.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"cluster":"w1"}}`))))
	waitReason(t, p, contract.ReasonChildConflict)
	c, err := condition(ctx, p, contract.ConditionSynced)
	require.NoError(t, err)
	assert.Contains(t, c.Message, "in cluster w1 exists and is not this parent's")

	untouched := func(when string) {
		t.Helper()
		d := &appsv1.Deployment{}
		require.NoError(t, wk.Get(ctx, client.ObjectKeyFromObject(forged), d), when)
		require.Len(t, d.Spec.Template.Spec.Containers, 1, when)
		assert.Equal(t, "sidecar", d.Spec.Template.Spec.Containers[0].Name, when)
		for _, m := range d.ManagedFields {
			assert.NotEqual(t, contract.FieldManager, m.Manager, "%s: the engine wrote the forged Deployment", when)
		}
		assert.Equal(t, forged.ResourceVersion, d.ResourceVersion, when)
	}
	untouched("after the move")

	deleteParent(t, p)
	untouched("after the parent's deletion")
	nsObj := &corev1.Namespace{}
	require.NoError(t, wk.Get(ctx, client.ObjectKey{Name: name}, nsObj))
	assert.Nil(t, nsObj.DeletionTimestamp, "the forged Namespace is not deleted with the parent")
}

// forgedLocalTemplate puts a cluster-scoped Namespace beside the parent
// once its spec asks for it: a child that cannot carry an owner reference.
const forgedLocalTemplate = `parent: {apiVersion: "multi.cuengine.dev/v1", kind: "ForgedLocal", spec: withNamespace: *false | bool}
policy: clusterScoped: true
if parent.spec.withNamespace {
	children: ns: {apiVersion: "v1", kind: "Namespace", metadata: name: "f-" + parent.metadata.namespace}
}
children: note: {apiVersion: "v1", kind: "ConfigMap", metadata: name: parent.metadata.name + "-note", data: note: "x"}
`

// TestForgedClusterScopedChildIsAConflict: the same forgery in the
// engine's own cluster, on a child that carries no owner reference (a
// Namespace, recorded in the inventory): a ChildConflict, the forged
// Namespace neither applied over nor deleted with the parent.
func TestForgedClusterScopedChildIsAConflict(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	ns := namespace(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "forgedlocal.cue"), []byte(forgedLocalTemplate), 0o644))
	set, err := templates.Load(dir)
	require.NoError(t, err)
	runEngine(t, set, engine.Options{InstallCRDs: true, ResourceResync: 10 * time.Minute})

	gvk := schema.GroupVersionKind{Group: "multi.cuengine.dev", Version: "v1", Kind: "ForgedLocal"}
	p := parent(gvk, ns, "victim", map[string]any{})
	eventually(t, "the ForgedLocal CRD served", func(ctx context.Context) (bool, error) {
		err := k8s.Create(ctx, p.DeepCopy())
		return err == nil, err
	})
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), p.DeepCopy()) })
	waitReason(t, p, contract.ReasonSynced)
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(gvk)
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(p), live))

	forged := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "f-" + ns, Labels: map[string]string{
		contract.LabelManagedBy: contract.ManagedByValue, contract.LabelParentUID: string(live.GetUID()), contract.LabelChild: "ns", "forger": "yes"}}}
	require.NoError(t, k8s.Create(ctx, forged, client.FieldOwner("kubectl-create")))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), forged) })

	require.NoError(t, k8s.Patch(ctx, p.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"withNamespace":true}}`))))
	waitReason(t, p, contract.ReasonChildConflict)
	c, err := condition(ctx, p, contract.ConditionSynced)
	require.NoError(t, err)
	assert.Contains(t, c.Message, "Namespace /f-"+ns+" exists and is not controlled by this ForgedLocal")

	untouched := func(when string) {
		t.Helper()
		got := &corev1.Namespace{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(forged), got), when)
		assert.Nil(t, got.DeletionTimestamp, when)
		assert.Equal(t, forged.ResourceVersion, got.ResourceVersion, "%s: the engine wrote the forged Namespace", when)
	}
	untouched("after the change")
	deleteParent(t, p)
	untouched("after the parent's deletion")
}

// deleteParent deletes the parent and waits until it is gone, its
// finalizer done.
func deleteParent(t *testing.T, p *unstructured.Unstructured) {
	t.Helper()
	require.NoError(t, k8s.Delete(context.Background(), p.DeepCopy()))
	eventuallyWithin(t, "the parent gone", time.Minute, func(ctx context.Context) (bool, error) {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(p.GroupVersionKind())
		err := k8s.Get(ctx, client.ObjectKeyFromObject(p), got)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}
