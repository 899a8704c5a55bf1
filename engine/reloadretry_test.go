package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/templates"
	"github.com/cuengine/engine/templates/watch"
)

// trayTemplate is served first; trayTighter bounds spec.size, which a
// live Tray breaks until it is edited.
const (
	trayTemplate = `
parent: {apiVersion: "tray.cuengine.dev/v1", kind: "Tray", spec: size: int}
children: settings: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: parent.metadata.name
	data: {size: "\(parent.spec.size)", version: "1"}
}
`
	trayTighter = `
parent: {apiVersion: "tray.cuengine.dev/v1", kind: "Tray", spec: size: int & <5}
children: settings: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: parent.metadata.name
	data: {size: "\(parent.spec.size)", version: "2"}
}
`
)

// TestRefusedReloadRetriedOnceLiveObjectsFit: a template set the live
// parents break is refused and the last good one keeps serving; once the
// parent is edited to fit, the retry worker accepts the set without a new
// edit of the files.
func TestRefusedReloadRetriedOnceLiveObjectsFit(t *testing.T) {
	controlPlane(t)
	load := func(src string) *templates.Set {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "tray.cue"), []byte(src), 0o644))
		set, err := templates.Load(dir)
		require.NoError(t, err)
		return set
	}
	first := load(trayTemplate)
	gvk := schema.GroupVersionKind{Group: "tray.cuengine.dev", Version: "v1", Kind: "Tray"}
	tray, ok := first.Lookup(gvk)
	require.True(t, ok)
	installCRD(t, tray.CRD())
	var servedMu sync.Mutex
	var served []*templates.Set
	eng, ctx := runEngine(t, first, engine.Options{OnServed: func(_ context.Context, set *templates.Set) {
		servedMu.Lock()
		defer servedMu.Unlock()
		served = append(served, set)
	}})
	ns := namespace(t)
	require.NoError(t, k8s.Create(context.Background(), parent(gvk, ns, "wide", map[string]any{"size": int64(7)})))
	configMapData := func(key, want string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			cm := &corev1.ConfigMap{}
			err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "wide"}, cm)
			return err == nil && cm.Data[key] == want, client.IgnoreNotFound(err)
		}
	}
	eventually(t, "the first template's ConfigMap", configMapData("version", "1"))

	tighter := load(trayTighter)
	eng.Reload(ctx, watch.ReloadEvent{Set: tighter, Changed: []string{"tray.cue"}})
	require.Error(t, eng.ReloadError())
	require.Contains(t, eng.ReloadError().Error(), "the new schema rejects live objects")
	assert.Same(t, first, eng.Served(), "a refused set is not served")

	p := parent(gvk, ns, "wide", nil)
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(p), p))
	require.NoError(t, unstructured.SetNestedField(p.Object, int64(3), "spec", "size"))
	require.NoError(t, k8s.Update(context.Background(), p))
	eventually(t, "the refused set accepted on a retry, the edit applied with it", func(ctx context.Context) (bool, error) {
		ok, err := configMapData("version", "2")(ctx)
		return ok && eng.ReloadError() == nil, err
	})
	eventually(t, "size 3 applied", configMapData("size", "3"))
	assert.Same(t, tighter, eng.Served())
	eventually(t, "the accepted set handed to OnServed, the refused one never before", func(context.Context) (bool, error) {
		servedMu.Lock()
		defer servedMu.Unlock()
		return len(served) == 1 && served[0] == tighter, nil
	})
}
