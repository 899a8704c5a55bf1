package reconciler

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/revisions"
)

// setReadyReplicas writes a Deployment's status as its controller would.
func (e *unitEnv) setReadyReplicas(namespace, name string, n int64) {
	e.t.Helper()
	d := e.get(deploymentGVK, namespace, name)
	require.NotNil(e.t, d)
	require.NoError(e.t, unstructured.SetNestedField(d.Object, n, "status", "readyReplicas"))
	require.NoError(e.t, e.store.Status().Update(e.ctx, d))
}

// settleStatus reconciles, as the watch events of the writes would, until
// a reconcile writes no child and the status is stored for the parent's
// generation.
func (e *unitEnv) settleStatus(parent *unstructured.Unstructured) {
	e.t.Helper()
	for range 6 {
		e.reconcileClean(parent)
		quiet := true
		for k := range e.takeWrites() {
			quiet = quiet && k == "status "+parent.GetKind()
		}
		if quiet && contract.GenerationObserved(e.reread(parent)) {
			return
		}
	}
	e.t.Fatalf("the reconciles of %s never settled", parent.GetName())
}

// TestWaitForReady: the Service that depends on a Deployment with a
// readyWhen is created only once the Deployment is ready, and stays, its
// UID unchanged, while the Deployment is not ready again (a rollout); so
// does the ConfigMap the template produces only while the Deployment is
// ready, and the parent says why. A spec change that drops the Service
// prunes it; one that the ConfigMap's condition reads no longer holds
// prunes it too.
func TestWaitForReady(t *testing.T) {
	parent := unitParent(unitWaiter, "w", map[string]any{"expose": true})
	e := newUnitEnv(t, unitWaiter, parent)
	e.kind.rev = &revisions.Revision{Number: 1, Hash: e.kind.tpl.Hash}

	e.settleStatus(parent)
	require.NotNil(t, e.get(deploymentGVK, unitNamespace, "w"))
	assert.Nil(t, e.get(serviceGVK, unitNamespace, "w"), "the Service waits")
	assert.Equal(t, cond{metav1.ConditionFalse, contract.ReasonWaiting,
		"waiting for Deployment w (readyWhen is false); child svc waits for deployment to be ready"},
		condOf(e.condition(parent, contract.ConditionReady)))

	e.setReadyReplicas(unitNamespace, "w", 1)
	e.settleStatus(parent)
	svc := e.get(serviceGVK, unitNamespace, "w")
	require.NotNil(t, svc, "created once the Deployment is ready")
	require.NotNil(t, e.get(configMapGVK, unitNamespace, "w-ready"))
	assert.Equal(t, cond{metav1.ConditionTrue, contract.ReasonReady, "all children are ready"}, condOf(e.condition(parent, contract.ConditionReady)))

	// A rollout: the Deployment is not ready for a while.
	e.setReadyReplicas(unitNamespace, "w", 0)
	e.takeDeletes()
	e.settleStatus(parent)
	assert.Empty(t, e.takeDeletes(), "nothing is pruned because the Deployment is not ready")
	assert.Equal(t, svc.GetUID(), e.get(serviceGVK, unitNamespace, "w").GetUID())
	require.NotNil(t, e.get(configMapGVK, unitNamespace, "w-ready"), "kept")
	assert.Equal(t, cond{metav1.ConditionFalse, contract.ReasonWaiting,
		"waiting for Deployment w (readyWhen is false); child marker kept: its condition reads observed.deployment, which changed; it goes when the spec or template changes"},
		condOf(e.condition(parent, contract.ConditionReady)))

	// A new template revision: the ConfigMap, whose condition does not
	// hold under it, goes.
	e.kind.rev = &revisions.Revision{Number: 2, Hash: "next"}
	e.settleStatus(parent)
	assert.Equal(t, []string{"ConfigMap w-ready Foreground"}, e.takeDeletes())
	assert.Nil(t, e.get(configMapGVK, unitNamespace, "w-ready"))
	assert.Equal(t, svc.GetUID(), e.get(serviceGVK, unitNamespace, "w").GetUID())

	// The spec drops the Service: it goes.
	cur := e.reread(parent)
	require.NoError(t, unstructured.SetNestedField(cur.Object, false, "spec", "expose"))
	cur.SetGeneration(2)
	e.update(cur)
	e.settleStatus(cur)
	assert.Equal(t, []string{"Service w Foreground"}, e.takeDeletes())
	assert.Nil(t, e.get(serviceGVK, unitNamespace, "w"))
	assert.Equal(t, cond{metav1.ConditionFalse, contract.ReasonWaiting, "waiting for Deployment w (readyWhen is false)"},
		condOf(e.condition(cur, contract.ConditionReady)))
}

// TestWaitWithoutRevision: a kind that keeps no revisions cannot tell
// a template change from the status, so a child whose condition no
// longer holds is pruned, as before.
func TestWaitWithoutRevision(t *testing.T) {
	parent := unitParent(unitWaiter, "w", map[string]any{"expose": true})
	e := newUnitEnv(t, unitWaiter, parent)
	e.settleStatus(parent)
	e.setReadyReplicas(unitNamespace, "w", 1)
	e.settleStatus(parent)
	require.NotNil(t, e.get(configMapGVK, unitNamespace, "w-ready"))
	e.setReadyReplicas(unitNamespace, "w", 0)
	e.settleStatus(parent)
	assert.Nil(t, e.get(configMapGVK, unitNamespace, "w-ready"))
}
