package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/templates"
)

// The readers of TestReferencesHeldByNeed: two kinds selecting the same
// five ConfigMaps, one naming one Secret.
const (
	pickerSource = `package picker

parent: {apiVersion: "refmem.cuengine.dev/v1", kind: "Picker"}
references: picked: {apiVersion: "v1", kind: "ConfigMap", selector: matchLabels: pick: "yes"}
children: seen: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: parent.metadata.name + "-seen"
	data: count: "\(len(observed.picked.items))"
}
`
	chooserSource = `package chooser

parent: {apiVersion: "refmem.cuengine.dev/v1", kind: "Chooser"}
references: chosen: {apiVersion: "v1", kind: "ConfigMap", selector: matchLabels: pick: "yes"}
children: seen: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: parent.metadata.name + "-seen"
	data: count: "\(len(observed.chosen.items))"
}
`
	keeperSource = `package keeper

parent: {apiVersion: "refmem.cuengine.dev/v1", kind: "Keeper"}
references: kept: {apiVersion: "v1", kind: "Secret", metadata: name: "secret-0007"}
children: seen: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: parent.metadata.name + "-seen"
	data: seen: observed.kept.metadata.name
}
`
)

// liveHeapMiB is the live heap after two collections, in MiB.
func liveHeapMiB() float64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20)
}

// TestReferencesHeldByNeed: with 2,000 ConfigMaps and 2,000 Secrets of
// 20 KB in the cluster, a template selecting 5 ConfigMaps holds the 5, not
// the 2,000; a second template selecting them holds no second copy; a
// template naming one Secret holds that Secret. A change of a selected
// object still reaches the readers, and the objects are let go when no
// parent reads them.
func TestReferencesHeldByNeed(t *testing.T) {
	controlPlane(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := namespace(t)
	const objects, picked = 2000, 5
	payload := strings.Repeat("x", 20<<10)
	t.Cleanup(func() {
		ctx := context.Background()
		assert.NoError(t, k8s.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(ns)))
		assert.NoError(t, k8s.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(ns)))
	})
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i := range objects {
		name := fmt.Sprintf("%04d", i)
		g.Go(func() error {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "config-" + name}, Data: map[string]string{"payload": payload}}
			if i < picked {
				cm.Labels = map[string]string{"pick": "yes"}
			}
			if err := k8s.Create(gctx, cm, testOwner); err != nil {
				return err
			}
			return k8s.Create(gctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "secret-" + name},
				Data: map[string][]byte{"payload": []byte(payload)}}, testOwner)
		})
	}
	require.NoError(t, g.Wait())

	dir := t.TempDir()
	load := func(sources ...string) *templates.Set {
		t.Helper()
		for i, src := range sources {
			require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("t%d.cue", i)), []byte(src), 0o644))
		}
		set, err := templates.Load(dir)
		require.NoError(t, err)
		return set
	}
	all := load(pickerSource, chooserSource, keeperSource)
	for _, tpl := range all.Templates() {
		installCRD(t, tpl.CRD())
	}
	empty, err := templates.Load(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(dir))
	require.NoError(t, os.Mkdir(dir, 0o755))

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", MapperProvider: engine.NewRESTMapper})
	require.NoError(t, err)
	eng, err := engine.New(mgr, engine.Options{RevisionNamespace: ns})
	require.NoError(t, err)
	eng.SetTemplates(empty)
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	defer func() { cancel(); <-done }()
	require.True(t, mgr.GetCache().WaitForCacheSync(ctx))

	seen := func(name, key, want string) {
		t.Helper()
		eventually(t, name+" seeing "+key+"="+want, func(ctx context.Context) (bool, error) {
			cm, err := getConfigMap(ctx, ns, name+"-seen")
			return err == nil && cm.Data[key] == want, client.IgnoreNotFound(err)
		})
	}
	baseline := liveHeapMiB()

	// One template selecting 5 ConfigMaps of 2,000.
	eng.SetTemplates(load(pickerSource))
	require.NoError(t, k8s.Create(ctx, parent(schema.GroupVersionKind{Group: "refmem.cuengine.dev", Version: "v1", Kind: "Picker"}, ns, "p", map[string]any{})))
	seen("p", "count", "5")
	first := liveHeapMiB()
	assert.Equal(t, picked, eng.ReferenceObjects(), "the ConfigMaps held: those selected")
	assert.Equal(t, 1, eng.ReferenceWatches())

	// A second template selecting the same ConfigMaps: no second copy.
	eng.SetTemplates(load(pickerSource, chooserSource))
	require.NoError(t, k8s.Create(ctx, parent(schema.GroupVersionKind{Group: "refmem.cuengine.dev", Version: "v1", Kind: "Chooser"}, ns, "c", map[string]any{})))
	seen("c", "count", "5")
	second := liveHeapMiB()
	assert.Equal(t, picked, eng.ReferenceObjects(), "the same 5 ConfigMaps, held once")
	assert.Equal(t, 1, eng.ReferenceWatches(), "one watch for both")

	// A template naming one Secret: that Secret.
	eng.SetTemplates(load(pickerSource, chooserSource, keeperSource))
	require.NoError(t, k8s.Create(ctx, parent(schema.GroupVersionKind{Group: "refmem.cuengine.dev", Version: "v1", Kind: "Keeper"}, ns, "k", map[string]any{})))
	seen("k", "seen", "secret-0007")
	third := liveHeapMiB()
	assert.Equal(t, picked+1, eng.ReferenceObjects(), "and the one Secret")
	assert.Equal(t, 2, eng.ReferenceWatches())
	t.Logf("live heap: baseline %.1f MiB; +%.1f MiB with a template selecting 5 of 2,000 ConfigMaps; +%.1f MiB with a second one; +%.1f MiB with one naming a Secret of 2,000",
		baseline, first-baseline, second-first, third-second)
	// Holding the 2,000 ConfigMaps of 20 KB costs over 40 MiB.
	assert.Less(t, first-baseline, 8.0, "the first template's reference costs the 5 objects, not the 2,000")
	assert.Less(t, second-first, 4.0, "a second template referencing the same objects costs no second copy")
	assert.Less(t, third-second, 4.0, "a Secret named costs one Secret, not the 2,000")

	// A change of a selected object still reaches both readers: one
	// ConfigMap leaves the selection, another joins it.
	unpick := &corev1.ConfigMap{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "config-0000"}, unpick))
	unpick.Labels = nil
	require.NoError(t, k8s.Update(ctx, unpick, testOwner))
	seen("p", "count", "4")
	seen("c", "count", "4")
	pick := &corev1.ConfigMap{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "config-1999"}, pick))
	pick.Labels = map[string]string{"pick": "yes"}
	require.NoError(t, k8s.Update(ctx, pick, testOwner))
	seen("p", "count", "5")
	seen("c", "count", "5")
	assert.Equal(t, picked+1, eng.ReferenceObjects())

	// No parent left: nothing held.
	for _, kind := range []string{"Picker", "Chooser", "Keeper"} {
		p := parent(schema.GroupVersionKind{Group: "refmem.cuengine.dev", Version: "v1", Kind: kind}, ns, strings.ToLower(kind[:1]), nil)
		require.NoError(t, k8s.Delete(ctx, p))
	}
	eventually(t, "no reference held", func(context.Context) (bool, error) {
		return eng.ReferenceObjects() == 0 && eng.ReferenceWatches() == 0, nil
	})
	_, err = getConfigMap(ctx, ns, "config-0001")
	assert.False(t, apierrors.IsNotFound(err), "the referenced objects are only let go, not deleted")
}
