package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/providers"
	"github.com/cuengine/engine/templates"
)

// stuckTemplate's one resource is served by stuckProvider, whose Apply
// does not return until the test lets it.
const stuckTemplate = `
parent: {apiVersion: "stuck.cuengine.dev/v1", kind: "Stuck"}
resources: thing: {provider: "stuck", spec: {}}
`

type stuckProvider struct{ release chan struct{} }

func (p *stuckProvider) ExternalName(_ context.Context, req providers.Request, _ int) (string, map[string]string, error) {
	return req.Owner.Name + "-thing", nil, nil
}

func (p *stuckProvider) Apply(ctx context.Context, _ providers.Request) (providers.Observation, error) {
	select {
	case <-p.release:
		return providers.Observation{Exists: true, Ready: true}, nil
	case <-ctx.Done():
		return providers.Observation{}, ctx.Err()
	}
}

func (p *stuckProvider) Delete(context.Context, providers.Request) error { return nil }

// Plan is not called by a reconcile.
func (p *stuckProvider) Plan(context.Context, providers.Request) (providers.Plan, error) {
	return providers.Plan{}, errors.New("stuckProvider: Plan is not called by a reconcile")
}

// TestStalledKindIsReported: when every worker of a kind is held (here by
// a provider call that does not return), the kind's status says it is
// stalled, which /readyz reports; once the call returns, it is not.
func TestStalledKindIsReported(t *testing.T) {
	controlPlane(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "stuck.cue"), []byte(stuckTemplate), 0o644))
	set, err := templates.Load(dir)
	require.NoError(t, err)
	gvk := schema.GroupVersionKind{Group: "stuck.cuengine.dev", Version: "v1", Kind: "Stuck"}
	tm, ok := set.Lookup(gvk)
	require.True(t, ok)
	installCRD(t, tm.CRD())

	stuck := &stuckProvider{release: make(chan struct{})}
	reg := providers.NewRegistry()
	reg.Register("stuck", stuck)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	require.NoError(t, err)
	eng, err := engine.New(mgr, engine.Options{Providers: reg, MaxConcurrentReconciles: 1, StallAfter: 2 * time.Second})
	require.NoError(t, err)
	eng.SetTemplates(set)
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	defer func() { cancel(); <-done }()

	stalled := func() string {
		for _, k := range eng.Status() {
			if strings.HasPrefix(k.Kind, "Stuck.") {
				return k.Stalled
			}
		}
		return ""
	}
	ns := namespace(t)
	require.NoError(t, k8s.Create(context.Background(), parent(gvk, ns, "a", map[string]any{})))
	eventually(t, "the kind reported stalled", func(context.Context) (bool, error) {
		return strings.Contains(stalled(), "stalled: all 1 workers held for more than 2s, the longest by "+ns+"/a"), nil
	})
	close(stuck.release)
	eventually(t, "the kind no longer stalled", func(context.Context) (bool, error) {
		return stalled() == "", nil
	})
}
