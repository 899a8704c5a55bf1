package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/templates"
	"github.com/cuengine/engine/templates/watch"
)

var meterGVK = schema.GroupVersionKind{Group: "meter.cuengine.dev", Version: "v1", Kind: "Meter"}

// meterTemplate owns one Deployment and copies one field of its status,
// field, into the parent's status.value.
func meterTemplate(field string) string {
	return `package meter

parent: {apiVersion: "meter.cuengine.dev/v1", kind: "Meter", spec: {}}
children: deployment: {
	apiVersion: "apps/v1"
	kind:       "Deployment"
	metadata: name: parent.metadata.name
	spec: {
		replicas: 3
		selector: matchLabels: app: parent.metadata.name
		template: {
			metadata: labels: app: parent.metadata.name
			spec: containers: [{name: "web", image: "nginx"}]
		}
	}
}
status: value: *observed.deployment.status.` + field + ` | 0
`
}

// TestReloadReadsAChildStatusFieldNotReadBefore: a template reloaded to
// read a field of its child's status that no template read before gets
// its value into the parent's status. What the engine holds of a child,
// and hands the template, follows the loaded templates (issue 39: a
// cache that kept only the fields read would have to follow a reload
// that widens them).
func TestReloadReadsAChildStatusFieldNotReadBefore(t *testing.T) {
	controlPlane(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "meter.cue")
	require.NoError(t, os.WriteFile(file, []byte(meterTemplate("readyReplicas")), 0o644))
	first, err := templates.Load(dir)
	require.NoError(t, err)
	meter, ok := first.Lookup(meterGVK)
	require.True(t, ok)
	installCRD(t, meter.CRD())

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

	p := parent(meterGVK, ns, "m1", map[string]any{})
	require.NoError(t, k8s.Create(ctx, p))
	var d *appsv1.Deployment
	eventually(t, "the Deployment", func(ctx context.Context) (bool, error) {
		d, err = getDeployment(ctx, ns, "m1")
		return err == nil, client.IgnoreNotFound(err)
	})
	// Ready and available differ, so the status says which one was read.
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 3, ReadyReplicas: 2, AvailableReplicas: 1, UpdatedReplicas: 3}
	require.NoError(t, k8s.Status().Update(ctx, d))
	value := func(want int64) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			cur := &unstructured.Unstructured{}
			cur.SetGroupVersionKind(meterGVK)
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(p), cur); err != nil {
				return false, err
			}
			n, found, err := unstructured.NestedInt64(cur.Object, "status", "value")
			return found && n == want, err
		}
	}
	eventually(t, "status.value from readyReplicas", value(2))

	require.NoError(t, os.WriteFile(file, []byte(meterTemplate("availableReplicas")), 0o644))
	eventually(t, "status.value from availableReplicas, read since the reload", value(1))
	require.NoError(t, eng.ReloadError())
}
