package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/revisions"
	"github.com/cuengine/engine/templates"
	"github.com/cuengine/engine/templates/watch"
)

var cargoGVK = schema.GroupVersionKind{Group: "cargo.cuengine.dev", Version: "v1", Kind: "Cargo"}

// cargoTemplate gives each parent a ConfigMap whose data says which
// version of the template made it; padding adds that many bytes of
// comment.
func cargoTemplate(version string, padding int) string {
	return `parent: {apiVersion: "cargo.cuengine.dev/v1", kind: "Cargo"}
children: load: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: parent.metadata.name
	data: version: "` + version + `"
}
` + strings.Repeat("// "+strings.Repeat("x", 96)+"\n", padding/100)
}

func reloadHealthy(t *testing.T) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == "engine_template_reload_healthy" {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	require.Fail(t, "engine_template_reload_healthy is not registered")
	return 0
}

// startCargo starts an engine as `engine run` does with the files of dir:
// a set whose only failures are templates too large to store is served,
// the failure reported as a refused reload.
func startCargo(t *testing.T, dir, revisionNS string) (*engine.Engine, func()) {
	t.Helper()
	set, loadErr := templates.Load(dir)
	if loadErr != nil {
		var le *templates.LoadError
		require.ErrorAs(t, loadErr, &le)
		require.NotNil(t, le.Servable, "only too large: %v", loadErr)
		set = le.Servable
	}
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	require.NoError(t, err)
	eng, err := engine.New(mgr, engine.Options{RevisionNamespace: revisionNS})
	require.NoError(t, err)
	eng.SetTemplates(set)
	if loadErr != nil {
		eng.Reload(ctx, watch.ReloadEvent{Err: loadErr})
	}
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	return eng, func() { cancel(); <-done }
}

// TestTemplateTooLargeToStore: a 1.7 MB template is refused by the running
// engine when it compiles, with its size and the limit: the last good
// version serves, /readyz's reload error and the reload metric say so,
// and no revision is attempted. An engine restarted with the file in
// place starts the kind on its newest stored revision and says so.
func TestTemplateTooLargeToStore(t *testing.T) {
	controlPlane(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "cargo.cue")
	require.NoError(t, os.WriteFile(file, []byte(cargoTemplate("one", 0)), 0o644))
	set, err := templates.Load(dir)
	require.NoError(t, err)
	cargo, _ := set.Lookup(cargoGVK)
	installCRD(t, cargo.CRD())
	ns := namespace(t)

	eng, stop := startCargo(t, dir, ns)
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()
	ctx := context.Background()
	version := func(name string) func(ctx context.Context) (string, error) {
		return func(ctx context.Context) (string, error) {
			cm := &corev1.ConfigMap{}
			err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cm)
			return cm.Data["version"], err
		}
	}
	waitVersion := func(name, want string) {
		t.Helper()
		eventually(t, "ConfigMap "+name+" of version "+want, func(ctx context.Context) (bool, error) {
			got, err := version(name)(ctx)
			return got == want, client.IgnoreNotFound(err)
		})
	}
	require.NoError(t, k8s.Create(ctx, parent(cargoGVK, ns, "a", map[string]any{})))
	waitVersion("a", "one")

	// The running engine: the edit is refused, the last good serving.
	require.NoError(t, os.WriteFile(file, []byte(cargoTemplate("two", 1_700_000)), 0o644))
	_, loadErr := templates.Load(dir)
	msg := "cargo.cue: the template's files take 1717231 bytes (1.64 MiB) as a stored revision, more than the 1310720 (1.25 MiB) allowed: etcd refuses requests over 1.5 MiB, and a ControllerRevision holds the files with its metadata; make the files smaller"
	require.EqualError(t, loadErr, msg)
	eng.Reload(ctx, watch.ReloadEvent{Err: loadErr, Changed: []string{"cargo.cue"}})
	require.EqualError(t, eng.ReloadError(), msg, "/readyz: templates on disk not served")
	assert.Zero(t, reloadHealthy(t), "the reload metric is unhealthy")
	require.NoError(t, k8s.Create(ctx, parent(cargoGVK, ns, "b", map[string]any{})))
	waitVersion("b", "one")
	revs, err := revisions.ListRevisions(ctx, k8s, ns, cargoGVK)
	require.NoError(t, err)
	assert.Len(t, revs, 1, "no revision attempted")

	// Restarted with the file in place: the kind starts on revision 1.
	stop()
	stopped = true
	eng, stop = startCargo(t, dir, ns)
	defer stop()
	require.EqualError(t, eng.ReloadError(), msg)
	assert.Zero(t, reloadHealthy(t))
	require.NoError(t, k8s.Create(ctx, parent(cargoGVK, ns, "c", map[string]any{})))
	waitVersion("c", "one")
	var status engine.KindStatus
	for _, k := range eng.Status() {
		if strings.HasPrefix(k.Kind, "Cargo.") {
			status = k
		}
	}
	assert.True(t, status.Running, "the kind runs")
	assert.Equal(t, "serving revision 1, the newest stored: the files cannot be stored as a revision ("+msg+")", status.Error, "and says why on /readyz")
	revs, err = revisions.ListRevisions(ctx, k8s, ns, cargoGVK)
	require.NoError(t, err)
	assert.Len(t, revs, 1)

	// The files made small again are accepted: the kind runs them.
	require.NoError(t, os.WriteFile(file, []byte(cargoTemplate("three", 0)), 0o644))
	set, err = templates.Load(dir)
	require.NoError(t, err)
	eng.Reload(ctx, watch.ReloadEvent{Set: set, Changed: []string{"cargo.cue"}})
	require.NoError(t, eng.ReloadError())
	waitVersion("c", "three")
	for _, k := range eng.Status() {
		if strings.HasPrefix(k.Kind, "Cargo.") {
			assert.Empty(t, k.Error)
		}
	}
}
