package reconciler

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
)

// staleParents plays a cache that has not seen the latest writes to one
// parent: it returns an older copy of it.
type staleParents struct {
	client.Reader
	stale *unstructured.Unstructured
}

func (s staleParents) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if key == client.ObjectKeyFromObject(s.stale) {
		s.stale.DeepCopyInto(obj.(*unstructured.Unstructured))
		return nil
	}
	return s.Reader.Get(ctx, key, obj, opts...)
}

// TestStaleCacheCannotSkipAStatusWrite: Ready goes True, False, then
// True again, and the cache still shows the first True when the last
// reconcile runs. Compared with the cache, the last status looks stored
// already; it is not (the False is), so it must be written. (Once in four
// etcd restarts, parents stayed Ready=False for good this way.)
func TestStaleCacheCannotSkipAStatusWrite(t *testing.T) {
	e, mk := settledMyKind(t)
	markUnitReady(t, e, "web", 1)
	e.reconcileClean(mk)
	readyTrue := e.reread(mk)
	assert.Equal(t, metav1.ConditionTrue, e.condition(mk, contract.ConditionReady).Status)

	markUnitReady(t, e, "web", 0) // the replica is gone: 0 of 1
	e.reconcileClean(mk)
	assert.Equal(t, metav1.ConditionFalse, e.condition(mk, contract.ConditionReady).Status, "the engine wrote Ready=False")
	e.takeWrites()

	markUnitReady(t, e, "web", 1)
	e.r.parents = staleParents{Reader: e.r.parents, stale: readyTrue}
	e.reconcileClean(mk)
	assert.Equal(t, map[string]int{"status MyKind": 1}, e.takeWrites(), "the write is not skipped")
	assert.Equal(t, cond{metav1.ConditionTrue, contract.ReasonReady, "all children are ready"}, condOf(e.condition(mk, contract.ConditionReady)))
}
