package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/templates"
)

// soloTemplate is a kind only this test's engine serves (the package's
// engine does not know it), so its child proves that engine works.
const soloTemplate = `
parent: {apiVersion: "solo.cuengine.dev/v1", kind: "Solo"}
children: settings: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: parent.metadata.name
	data: servedBy: "second engine"
}
`

// TestUnknownKindDoesNotStopTheOthers: a template whose kind has no CRD is
// an error for that template only; the other kinds are served.
func TestUnknownKindDoesNotStopTheOthers(t *testing.T) {
	controlPlane(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "solo.cue"), []byte(soloTemplate), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ghost.cue"), []byte(`parent: {apiVersion: "ghost.cuengine.dev/v1", kind: "Ghost"}`), 0o644))
	set, err := templates.Load(dir)
	require.NoError(t, err)
	soloGVK := schema.GroupVersionKind{Group: "solo.cuengine.dev", Version: "v1", Kind: "Solo"}
	solo, ok := set.Lookup(soloGVK)
	require.True(t, ok)
	installCRD(t, solo.CRD())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	require.NoError(t, err)
	eng, err := engine.New(mgr, engine.Options{})
	require.NoError(t, err)
	eng.SetTemplates(set)
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	defer func() { cancel(); <-done }()

	eventually(t, "Ghost reported, Solo running", func(ctx context.Context) (bool, error) {
		var ghost, solo engine.KindStatus
		for _, k := range eng.Status() {
			switch {
			case strings.HasPrefix(k.Kind, "Ghost."):
				ghost = k
			case strings.HasPrefix(k.Kind, "Solo."):
				solo = k
			}
		}
		return strings.Contains(ghost.Error, "is not served by the cluster (is its CRD installed?") && !ghost.Running && solo.Running, nil
	})
	ns := namespace(t)
	require.NoError(t, k8s.Create(context.Background(), parent(soloGVK, ns, "x", map[string]any{})))
	eventually(t, "the Solo's ConfigMap, written by the second engine", func(ctx context.Context) (bool, error) {
		cm := &corev1.ConfigMap{}
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "x"}, cm)
		return err == nil && cm.Data["servedBy"] == "second engine", err
	})
}

// installCRD creates a CRD and waits until it is served.
func installCRD(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	require.NoError(t, k8s.Create(context.Background(), crd))
	eventually(t, "CRD "+crd.Name+" established", func(ctx context.Context) (bool, error) {
		cur := &apiextensionsv1.CustomResourceDefinition{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(crd), cur); err != nil {
			return false, err
		}
		for _, c := range cur.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

// serveTemplates runs a second engine, beside the package's, serving the
// templates in files (name -> source) with opts, their CRDs installed and
// established first. It stops when the test ends.
func serveTemplates(t *testing.T, files map[string]string, opts engine.Options) *templates.Set {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644))
	}
	set, err := templates.Load(dir)
	require.NoError(t, err)
	for _, tpl := range set.Templates() {
		installCRD(t, tpl.CRD())
	}
	runEngine(t, set, opts)
	return set
}

// runEngine runs an engine with opts over set until the test ends.
func runEngine(t *testing.T, set *templates.Set, opts engine.Options) (*engine.Engine, context.Context) {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", MapperProvider: engine.NewRESTMapper})
	require.NoError(t, err)
	eng, err := engine.New(mgr, opts)
	require.NoError(t, err)
	eng.SetTemplates(set)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return eng, ctx
}
