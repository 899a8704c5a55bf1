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
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/templates"
	"github.com/cuengine/engine/templates/watch"
)

var boxGVK = schema.GroupVersionKind{Group: "box.cuengine.dev", Version: "v1", Kind: "Box"}

// boxTemplate owns one ConfigMap; extra is spliced into the ConfigMap.
func boxTemplate(note, extra string) string {
	return `parent: {apiVersion: "box.cuengine.dev/v1", kind: "Box", spec: size: *"s" | string}
children: config: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: parent.metadata.name
	data: {note: "` + note + `", size: parent.spec.size}
` + extra + `
}
`
}

// TestReloadRefusesAChildThatBreaksItsSchema: a live reload of a template
// whose child has a field its kind's schema does not declare is refused
// like any compile error, before any parent is evaluated with it: the
// watcher reports it, the engine keeps serving the last good template (a
// spec change is still applied with it), the readiness error and a Warning
// event on the parent name the field, and the child never gets the new
// template's content.
func TestReloadRefusesAChildThatBreaksItsSchema(t *testing.T) {
	controlPlane(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "box.cue")
	require.NoError(t, os.WriteFile(file, []byte(boxTemplate("v1", "")), 0o644))
	first, err := templates.Load(dir)
	require.NoError(t, err)
	box, ok := first.Lookup(boxGVK)
	require.True(t, ok)
	installCRD(t, box.CRD())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", MapperProvider: engine.NewRESTMapper})
	require.NoError(t, err)
	ns := namespace(t)
	eng, err := engine.New(mgr, engine.Options{RevisionNamespace: ns, MaxConcurrentReconciles: 2})
	require.NoError(t, err)
	eng.SetTemplates(first)
	watcher, err := watch.New(dir, first, watch.Options{
		Debounce: 50 * time.Millisecond,
		OnReload: func(ev watch.ReloadEvent) { eng.Reload(ctx, ev) },
	})
	require.NoError(t, err)
	done := make(chan error, 2)
	go func() { done <- mgr.Start(ctx) }()
	go func() { done <- watcher.Run(ctx) }()
	defer func() { cancel(); <-done; <-done }()

	p := parent(boxGVK, ns, "b1", map[string]any{})
	require.NoError(t, k8s.Create(ctx, p))
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: ns, Name: "b1"}
	eventually(t, "the ConfigMap of the first template", func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, key, cm)
		return err == nil && cm.Data["note"] == "v1", client.IgnoreNotFound(err)
	})

	// A typo of the child's field, with a note that would change the child.
	require.NoError(t, os.WriteFile(file, []byte(boxTemplate("v2", "	dta: extra: \"x\"")), 0o644))
	const want = "box.cue:7:2: children.config.dta: field not allowed"
	eventually(t, "the reload refused", func(context.Context) (bool, error) {
		err := eng.ReloadError()
		return err != nil && err.Error() == want, nil
	})
	require.Error(t, watcher.LastError())
	assert.Equal(t, want, watcher.LastError().Error())
	assert.Same(t, first, watcher.Current(), "the watcher keeps the last good set")
	eventually(t, "a Warning event on the parent naming the field", func(ctx context.Context) (bool, error) {
		events := &corev1.EventList{}
		if err := k8s.List(ctx, events, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, ev := range events.Items {
			if ev.Reason == contract.ReasonTemplateReloadFailed && ev.InvolvedObject.Name == "b1" && strings.Contains(ev.Message, want) {
				return true, nil
			}
		}
		return false, nil
	})

	// The last good template keeps serving: a spec change reaches the
	// child with the old note, so nothing of the refused template did.
	require.NoError(t, k8s.Patch(ctx, p, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"size":"l"}}`))))
	eventually(t, "the spec change applied with the last good template", func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, key, cm)
		return err == nil && cm.Data["size"] == "l", err
	})
	assert.Equal(t, "v1", cm.Data["note"])
	assert.NotContains(t, cm.Data, "extra")
}
