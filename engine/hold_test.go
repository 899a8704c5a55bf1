package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/templates"
)

// shelfTemplate's first half is a valid template on its own: a parent and
// no children. An editor that writes the file in two halves serves it for a
// moment.
const (
	shelfHead = `parent: {apiVersion: "shelf.cuengine.dev/v1", kind: "Shelf"}
`
	shelfTail = `children: books: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: parent.metadata.name
	data: shelf: parent.metadata.name
}
`
)

var shelfGVK = schema.GroupVersionKind{Group: "shelf.cuengine.dev", Version: "v1", Kind: "Shelf"}

// reloadEvent loads one version of the template as the watcher would.
func reloadEvent(t *testing.T, dir, content string) templates.ReloadEvent {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "shelf.cue"), []byte(content), 0o644))
	set, err := templates.Load(dir)
	require.NoError(t, err)
	return templates.ReloadEvent{Set: set, Changed: []string{"shelf.cue"}}
}

// TestTemplateWrittenInTwoHalvesDeletesNothing: a template saved in two
// writes is, between them, a valid template without children. The engine
// holds that version instead of deleting every child, and serves the
// complete one; a deletion the author means is served once the hold ends.
func TestTemplateWrittenInTwoHalvesDeletesNothing(t *testing.T) {
	controlPlane(t)
	dir := t.TempDir()
	full := reloadEvent(t, dir, shelfHead+shelfTail)
	shelf, ok := full.Set.Lookup(shelfGVK)
	require.True(t, ok)
	installCRD(t, shelf.CRD())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	require.NoError(t, err)
	eng, err := engine.New(mgr, engine.Options{DeleteHold: 3 * time.Second})
	require.NoError(t, err)
	eng.SetTemplates(full.Set)
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	defer func() { cancel(); <-done }()

	ns := namespace(t)
	for _, name := range []string{"a", "b"} {
		require.NoError(t, k8s.Create(ctx, parent(shelfGVK, ns, name, map[string]any{})))
	}
	books := map[string]*corev1.ConfigMap{}
	eventually(t, "both children", func(ctx context.Context) (bool, error) {
		for _, name := range []string{"a", "b"} {
			cm := &corev1.ConfigMap{}
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
				return false, err
			}
			books[name] = cm
		}
		return true, nil
	})
	eventually(t, "the Shelf kind running", func(context.Context) (bool, error) {
		for _, k := range eng.Status() {
			if strings.HasPrefix(k.Kind, "Shelf.") {
				return k.Running, nil
			}
		}
		return false, nil
	})

	// The first half: held, nothing deleted.
	eng.Reload(ctx, reloadEvent(t, dir, shelfHead))
	var held *engine.HoldError
	require.True(t, errors.As(eng.ReloadError(), &held), "held: %v", eng.ReloadError())
	assert.Equal(t, 2, held.Deletes)
	assert.Equal(t, []string{"shelf.cue"}, held.Templates)
	assert.Contains(t, held.Error(), "held: the new version of shelf.cue would delete 2 children (Shelf "+ns+"/a: ConfigMap "+ns+"/a; Shelf "+ns+"/b: ConfigMap "+ns+"/b)")

	// The second half, within the hold: served, the children untouched.
	eng.Reload(ctx, reloadEvent(t, dir, shelfHead+shelfTail))
	require.NoError(t, eng.ReloadError())
	// Past the end of the first half's hold, still nothing deleted.
	deadline := held.Until.Add(2 * time.Second)
	eventually(t, "past the first half's hold", func(context.Context) (bool, error) { return time.Now().After(deadline), nil })
	for name, before := range books {
		cm := &corev1.ConfigMap{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cm))
		assert.Equal(t, before.UID, cm.UID, "child %s never deleted", name)
	}

	// Removing the child on purpose: held, then served, then deleted.
	eng.Reload(ctx, reloadEvent(t, dir, shelfHead+"// the books go\n"))
	require.True(t, errors.As(eng.ReloadError(), &held))
	eventually(t, "the deletion served after the hold", func(ctx context.Context) (bool, error) {
		if eng.ReloadError() != nil {
			return false, nil
		}
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a"}, &corev1.ConfigMap{})
		return apierrors.IsNotFound(err), nil
	})
}
