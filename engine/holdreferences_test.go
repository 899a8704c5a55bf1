package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/revisions"
	"github.com/cuengine/engine/templates"
	"github.com/cuengine/engine/templates/watch"
)

// rackSource's child exists only while the template sees its reference:
// a hold check that rendered a new version without reading references
// would count the child as deleted.
const rackSource = `package rack

parent: {apiVersion: "rack.cuengine.dev/v1", kind: "Rack"}
references: settings: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "rack-settings"}
if observed.settings != _|_ {
	children: books: {
		apiVersion: "v1"
		kind:       "ConfigMap"
		metadata: name: parent.metadata.name
		data: team: observed.settings.data.team
	}
}
`

var rackGVK = schema.GroupVersionKind{Group: "rack.cuengine.dev", Version: "v1", Kind: "Rack"}

// TestHoldReadsReferences: the rollout's hold check sees a parent's
// references as its reconcile does (render.Observe, through the engine's
// cache): a new version that keeps the child the reference brings is not
// held, and the child is untouched.
func TestHoldReadsReferences(t *testing.T) {
	controlPlane(t)
	dir := t.TempDir()
	first := reloadEventOf(t, dir, "rack.cue", rackSource)
	rack, ok := first.Set.Lookup(rackGVK)
	require.True(t, ok)
	installCRD(t, rack.CRD())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	require.NoError(t, err)
	ns := namespace(t)
	eng, err := engine.New(mgr, engine.Options{RevisionNamespace: ns})
	require.NoError(t, err)
	eng.SetTemplates(first.Set)
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	defer func() { cancel(); <-done }()

	require.NoError(t, k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rack-settings"}, Data: map[string]string{"team": "checkout"}}))
	require.NoError(t, k8s.Create(ctx, parent(rackGVK, ns, "a", map[string]any{})))
	books := &corev1.ConfigMap{}
	eventually(t, "the child the reference brings", func(ctx context.Context) (bool, error) {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a"}, books) == nil, nil
	})
	phases := func(ctx context.Context) ([]string, error) {
		revs, err := revisions.ListRevisions(ctx, k8s, ns, rackGVK)
		var out []string
		for _, r := range revs {
			out = append(out, fmt.Sprintf("%d %s", r.Number, r.Phase))
		}
		return out, err
	}
	eventually(t, "revision 1 complete", func(ctx context.Context) (bool, error) {
		got, err := phases(ctx)
		return slices.Equal(got, []string{"1 Complete"}), err
	})

	eng.Reload(ctx, reloadEventOf(t, dir, "rack.cue", rackSource+"// version 2\n"))
	eventually(t, "revision 2 complete, not held", func(ctx context.Context) (bool, error) {
		got, err := phases(ctx)
		return slices.Equal(got, []string{"1 Complete", "2 Complete"}) || slices.Equal(got, []string{"1 Superseded", "2 Complete"}), err
	})
	after := &corev1.ConfigMap{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a"}, after))
	assert.Equal(t, books.UID, after.UID, "the child is never deleted")
}

// reloadEventOf writes file with content into dir and loads the
// directory as the watcher would.
func reloadEventOf(t *testing.T, dir, file, content string) watch.ReloadEvent {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644))
	set, err := templates.Load(dir)
	require.NoError(t, err)
	return watch.ReloadEvent{Set: set, Changed: []string{file}}
}
