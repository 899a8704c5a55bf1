package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/templates"
)

// TestUnknownKindDoesNotStopTheOthers: a template whose kind has no CRD is
// an error for that template only; the other kinds are served.
func TestUnknownKindDoesNotStopTheOthers(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile("testdata/templates/mykind.cue")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "mykind.cue"), src, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ghost.cue"), []byte(`parent: {apiVersion: "ghost.cuengine.dev/v1", kind: "Ghost"}`), 0o644))
	set, err := templates.Load(dir)
	require.NoError(t, err)

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

	eventually(t, "Ghost reported, MyKind running", func(ctx context.Context) (bool, error) {
		var ghost, mykind engine.KindStatus
		for _, k := range eng.Status() {
			switch {
			case strings.HasPrefix(k.Kind, "Ghost."):
				ghost = k
			case strings.HasPrefix(k.Kind, "MyKind."):
				mykind = k
			}
		}
		return strings.Contains(ghost.Error, "is not served by the cluster (is its CRD installed?") && mykind.Running, nil
	})
	// The MyKind controller of this second engine works: a parent gets its
	// child (the package's own engine reconciles it too; either is fine).
	ns := namespace(t)
	require.NoError(t, k8s.Create(context.Background(), parent(myKindGVK, ns, "x", map[string]any{"deploymentName": "x"})))
	eventually(t, "the Deployment", func(ctx context.Context) (bool, error) {
		return true, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "x"}, &appsv1.Deployment{})
	})
	assert.NotEmpty(t, eng.Status())
}
