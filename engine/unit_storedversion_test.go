package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/cuengine/engine/reconciler"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

// TestStoredVersionToHub: a parent read in its stored version (v1) is
// converted to the hub (v2) in the engine; one the hub refuses is kept as
// stored, marked with the conversion's message under the hub's apiVersion
// (as the informer expects), and the parent cache gives it back in its
// stored version, the mark kept for the reconciler.
func TestStoredVersionToHub(t *testing.T) {
	set, err := templates.Load("../cmd/engine/testdata/conversion") // hub v2 bounds replicas to 10, v1 does not
	require.NoError(t, err)
	tpl := set.Templates()[0]
	s := &storedReads{limits: render.Limits{EvaluationTimeout: 5 * time.Second}}
	v1 := func(name string, replicas int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps.example.com/v1", "kind": "App",
			"metadata": map[string]any{"name": name, "namespace": "apps", "resourceVersion": "7"},
			"spec":     map[string]any{"image": "nginx", "replicas": replicas},
		}}
	}

	good := v1("good", 3)
	s.toHub(tpl, tpl.GVK, good)
	assert.Equal(t, "apps.example.com/v2", good.GetAPIVersion())
	assert.Equal(t, map[string]any{"container": map[string]any{"image": "nginx", "replicas": int64(3)}}, good.Object["spec"])
	assert.Empty(t, reconciler.UnconvertibleVersion(good))

	bad := v1("big", 20)
	s.toHub(tpl, tpl.GVK, bad)
	assert.Equal(t, "apps.example.com/v2", bad.GetAPIVersion(), "under the informer's apiVersion")
	assert.Equal(t, map[string]any{"image": "nginx", "replicas": int64(20)}, bad.Object["spec"], "kept as stored")
	assert.Equal(t, "apps.example.com/v1", reconciler.UnconvertibleVersion(bad))
	assert.Contains(t, bad.Object[reconciler.UnconvertibleKey].(map[string]any)["message"], "converting v1 to v2: app.cue:18:30: spec.container.replicas: invalid value 20 (out of bound <=10)")

	packed, err := packParent(bad)
	require.NoError(t, err)
	c := parentCache{storeCache{objs: []*unstructured.Unstructured{packed.(*unstructured.Unstructured)}}}
	got := &unstructured.Unstructured{}
	require.NoError(t, c.Get(context.Background(), types.NamespacedName{Namespace: "apps", Name: "big"}, got))
	assert.Equal(t, "apps.example.com/v1", got.GetAPIVersion(), "read back in its stored version, where its writes go")
	assert.Equal(t, "apps.example.com/v1", reconciler.UnconvertibleVersion(got))
}

// TestConvertingWatchStops: events pass through the conversion in order;
// Stop ends the loop even when the consumer stopped reading with an event
// on its way, and waits for it.
func TestConvertingWatchStops(t *testing.T) {
	in := watch.NewFake()
	w := newConvertingWatch(in, func(ev watch.Event) watch.Event {
		ev.Object.(*unstructured.Unstructured).SetAPIVersion("apps.example.com/v2")
		return ev
	})
	obj := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps.example.com/v1", "kind": "App"}}
		u.SetName(name)
		return u
	}
	go in.Add(obj("a"))
	ev := <-w.ResultChan()
	assert.Equal(t, watch.Added, ev.Type)
	assert.Equal(t, "apps.example.com/v2", ev.Object.(*unstructured.Unstructured).GetAPIVersion())
	sent := make(chan struct{})
	go func() { in.Modify(obj("b")); close(sent) }() // never read
	<-sent
	w.Stop()
	_, open := <-w.ResultChan()
	assert.False(t, open, "closed once stopped")
	assert.True(t, in.IsStopped())
}
