package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"
)

// TestOneInformerWaitsForItsOwnInformer: a watch waits for the
// informer of its own type, not for every informer of the cache it shares
// with other kinds (one slow first list held back every kind's start).
func TestOneInformerWaitsForItsOwnInformer(t *testing.T) {
	ctx := context.Background()
	gvk := func(kind string) schema.GroupVersionKind {
		return schema.GroupVersionKind{Group: "apps.cuengine.dev", Version: "v1", Kind: kind}
	}
	object := func(kind string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk(kind))
		return u
	}
	slowInformer := controllertest.NewFakeInformer() // not synced
	never := false
	c := &informertest.FakeInformers{
		Synced:         &never, // the cache as a whole never syncs
		InformersByGVK: map[schema.GroupVersionKind]toolscache.SharedIndexInformer{gvk("Slow"): slowInformer},
	}
	synced, slow := object("Synced"), object("Slow") // the first one's informer is synced when made

	assert.False(t, c.WaitForCacheSync(ctx), "the shared cache as controller-runtime's source.Kind waits for it")
	assert.True(t, cacheFor(c, synced).WaitForCacheSync(ctx), "the synced kind's watch does not wait for the slow one")

	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	assert.False(t, cacheFor(c, slow).WaitForCacheSync(short), "the slow kind's watch waits for its own informer, until its context ends")

	slowInformer.Synced()
	assert.True(t, cacheFor(c, slow).WaitForCacheSync(ctx), "and goes on once it synced")
}
