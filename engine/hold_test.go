package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/revisions"
	"github.com/cuengine/engine/templates"
	"github.com/cuengine/engine/templates/watch"
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
func reloadEvent(t *testing.T, dir, content string) watch.ReloadEvent {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "shelf.cue"), []byte(content), 0o644))
	set, err := templates.Load(dir)
	require.NoError(t, err)
	return watch.ReloadEvent{Set: set, Changed: []string{"shelf.cue"}}
}

// TestTemplateWrittenInTwoHalvesDeletesNothing: a template saved in two
// writes is, between them, a valid template without children. The engine
// records it as a revision and holds it instead of deleting every child;
// the complete file supersedes it. A deletion the author means waits for a
// confirmation (engine rollout resume), then goes through.
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
	ns := namespace(t)
	revisionNS := ns // this test's revisions, apart from the other tests'
	eng, err := engine.New(mgr, engine.Options{RevisionNamespace: revisionNS})
	require.NoError(t, err)
	eng.SetTemplates(full.Set)
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	defer func() { cancel(); <-done }()

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
	shelfStatus := func() engine.KindStatus {
		for _, k := range eng.Status() {
			if strings.HasPrefix(k.Kind, "Shelf.") {
				return k
			}
		}
		return engine.KindStatus{}
	}
	phases := func(ctx context.Context) ([]string, error) {
		revs, err := revisions.ListRevisions(ctx, k8s, revisionNS, shelfGVK)
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

	// The first half: recorded as revision 2 and held, nothing deleted.
	eng.Reload(ctx, reloadEvent(t, dir, shelfHead))
	require.NoError(t, eng.ReloadError(), "the files are served; the revision is held")
	eventually(t, "revision 2 held", func(ctx context.Context) (bool, error) {
		got, err := phases(ctx)
		return slices.Equal(got, []string{"1 Complete", "2 Held"}), err
	})
	assert.Contains(t, shelfStatus().Held, "revision 2 held: the new version of shelf.cue would delete 2 children (Shelf "+ns+"/a: ConfigMap "+ns+"/a; Shelf "+ns+"/b: ConfigMap "+ns+"/b)")
	revs, err := revisions.ListRevisions(ctx, k8s, revisionNS, shelfGVK)
	require.NoError(t, err)
	assert.Equal(t, []int{-1, 2}, []int{revs[0].HeldDeletes, revs[1].HeldDeletes}, "the count is recorded on the held revision only")

	// The second half: the files are revision 1's content again, which
	// the fleet runs; it becomes revision 3, revision 2 is superseded, and
	// the children are untouched.
	eng.Reload(ctx, reloadEvent(t, dir, shelfHead+shelfTail))
	eventually(t, "revision 2 superseded, revision 1 renumbered 3", func(ctx context.Context) (bool, error) {
		got, err := phases(ctx)
		return slices.Equal(got, []string{"2 Superseded", "3 Complete"}) && shelfStatus().Held == "", err
	})
	for name, before := range books {
		cm := &corev1.ConfigMap{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cm))
		assert.Equal(t, before.UID, cm.UID, "child %s never deleted", name)
		assert.Equal(t, before.ResourceVersion, cm.ResourceVersion, "child %s never changed", name)
	}
	eventually(t, "the parents on revision 3", func(ctx context.Context) (bool, error) {
		for _, name := range []string{"a", "b"} {
			p := parent(shelfGVK, ns, name, nil)
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
				return false, err
			}
			if number, _ := contract.ParentRevision(p); number != 3 {
				return false, nil
			}
		}
		return true, nil
	})

	// Removing the child on purpose: held until confirmed, then deleted.
	eng.Reload(ctx, reloadEvent(t, dir, shelfHead+"// the books go\n"))
	eventually(t, "revision 4 held", func(ctx context.Context) (bool, error) {
		got, err := phases(ctx)
		return slices.Equal(got, []string{"2 Superseded", "3 Complete", "4 Held"}), err
	})
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a"}, &corev1.ConfigMap{}), "not deleted while held")
	cr := &appsv1.ControllerRevision{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: revisionNS, Name: revisions.RevisionName(shelfGVK, reloadEvent(t, dir, shelfHead+"// the books go\n").Set.Templates()[0].Hash)}, cr))
	cr.Annotations[contract.AnnotationRolloutApproved] = "true"
	require.NoError(t, k8s.Update(ctx, cr))
	eventually(t, "the deletion served once confirmed", func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "a"}, &corev1.ConfigMap{})
		return apierrors.IsNotFound(err), nil
	})
	got, err := phases(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"2 Superseded", "3 Complete", "4 Complete"}, got)
}
