package reconciler

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates"
)

var unitConsumer = schema.GroupVersionKind{Group: "test.cuengine.dev", Version: "v1", Kind: "Consumer"}

// unitReferences reads references from the fake apiserver, as the
// engine's reference cache does from its informers, and records what each
// parent references.
type unitReferences struct {
	store   client.Reader
	mu      sync.Mutex
	tracked map[types.NamespacedName][]templates.Reference
}

func (u *unitReferences) Track(parent types.NamespacedName, refs []templates.Reference) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if refs == nil {
		delete(u.tracked, parent)
		return
	}
	u.tracked[parent] = refs
}

func (u *unitReferences) Read(ctx context.Context, ref templates.Reference) ([]*unstructured.Unstructured, error) {
	if ref.ByName() {
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(ref.GVK)
		err := u.store.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.ObjectName}, obj)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return []*unstructured.Unstructured{obj}, err
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(ref.GVK.GroupVersion().WithKind(ref.GVK.Kind + "List"))
	if err := u.store.List(ctx, list, client.InNamespace(ref.Namespace), client.MatchingLabels(ref.Selector)); err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

func (u *unitReferences) trackedOf(parent *unstructured.Unstructured) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []string
	for _, r := range u.tracked[types.NamespacedName{Namespace: parent.GetNamespace(), Name: parent.GetName()}] {
		out = append(out, r.Name+"="+r.String())
	}
	return out
}

// TestReferences: a missing reference writes nothing but the status,
// names the object and is tracked, so its appearance requeues the parent;
// the settled check includes the reference, so a change of it evaluates
// again and reaches the child; a reference gone again keeps the child.
func TestReferences(t *testing.T) {
	c := unitParent(unitConsumer, "c", map[string]any{"settings": "s", "team": "a"})
	e := newUnitEnv(t, unitConsumer, c)

	res, err := e.reconcile(c)
	require.NoError(t, err)
	assert.Equal(t, ctrl.Result{}, res, "no requeue: the watch brings the reference")
	assert.Equal(t, map[string]int{"status Consumer": 1}, e.takeWrites(), "nothing but the status")
	synced := e.condition(c, contract.ConditionSynced)
	require.NotNil(t, synced)
	assert.Equal(t, contract.ReasonReferenceNotFound, synced.Reason)
	assert.Equal(t, "waiting for referenced ConfigMap ns/s (references.settings): nothing is created until it exists", synced.Message)
	assert.Equal(t, contract.ReasonReferenceNotFound, e.condition(c, contract.ConditionReady).Reason)
	assert.Equal(t, []string{"peers=Service ns with labels team=a", "settings=ConfigMap ns/s"}, e.refs.trackedOf(c))

	settings := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: unitNamespace, Name: "s"}, Data: map[string]string{"greeting": "hello"}}
	require.NoError(t, e.store.Create(e.ctx, settings))
	e.reconcileClean(c) // applies the child
	e.reconcileClean(c) // writes the status
	assert.Equal(t, "hello", e.get(configMapGVK, unitNamespace, "c-app").Object["data"].(map[string]any)["greeting"])
	e.reconcileClean(c)
	e.takeWrites()
	before := e.evaluations()
	e.reconcileClean(c)
	assert.Equal(t, before, e.evaluations(), "settled")

	settings.Data["greeting"] = "hi"
	require.NoError(t, e.store.Update(e.ctx, settings))
	e.reconcileClean(c)
	assert.Equal(t, before+1, e.evaluations(), "a new resource version of the reference is a new input")
	assert.Equal(t, map[string]int{"apply ConfigMap": 1}, e.takeWrites())
	assert.Equal(t, "hi", e.get(configMapGVK, unitNamespace, "c-app").Object["data"].(map[string]any)["greeting"])

	require.NoError(t, e.store.Delete(e.ctx, settings))
	_, err = e.reconcile(c)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"status Consumer": 1}, e.takeWrites(), "the child is neither changed nor pruned")
	assert.NotNil(t, e.get(configMapGVK, unitNamespace, "c-app"))
	assert.Equal(t, "referenced ConfigMap ns/s (references.settings) not found: the 1 existing children are kept as they are, nothing is created, updated or deleted until it exists again",
		e.condition(c, contract.ConditionSynced).Message)
}
