package revisions_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/revisions"
	"github.com/cuengine/engine/templates"
)

var shelf = schema.GroupVersionKind{Group: "shelf.cuengine.dev", Version: "v1", Kind: "Shelf"}

// shelfTemplate compiles a Shelf template; note makes versions with
// different content.
func shelfTemplate(t *testing.T, kind, note string) *templates.Template {
	t.Helper()
	dir := t.TempDir()
	src := `parent: {apiVersion: "shelf.cuengine.dev/v1", kind: "` + kind + `"}
children: books: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: parent.metadata.name
	data: note: "` + note + `"
}
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "shelf.cue"), []byte(src), 0o644))
	set, err := templates.Load(dir)
	require.NoError(t, err)
	return set.Templates()[0]
}

func newStore(t *testing.T) *revisions.Store {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, appsv1.AddToScheme(scheme))
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	return &revisions.Store{Client: c, Reader: c, Namespace: "engine-system", GVK: shelf}
}

// TestStore: the numbers Ensure gives (the first revision complete), what
// Record writes and clears, and what Prune keeps.
func TestStore(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	v1, v2, v3 := shelfTemplate(t, "Shelf", "one"), shelfTemplate(t, "Shelf", "two"), shelfTemplate(t, "Shelf", "three")

	r1, first, err := s.Ensure(ctx, v1)
	require.NoError(t, err)
	assert.True(t, first, "the kind's first revision")
	assert.Equal(t, revisions.Revision{
		Name: revisions.RevisionName(shelf, v1.Hash), Kind: "Shelf.shelf.cuengine.dev/v1", Number: 1, Hash: v1.Hash, Path: "shelf.cue",
		Created: r1.Created, Phase: revisions.PhaseComplete, Message: "the first revision of the kind", HeldDeletes: -1,
	}, r1, "nothing ran before the first revision: it is stored complete")
	again, first, err := s.Ensure(ctx, v1)
	require.NoError(t, err)
	assert.False(t, first)
	assert.Equal(t, r1, again, "the newest, as it stands")

	r2, first, err := s.Ensure(ctx, v2)
	require.NoError(t, err)
	assert.False(t, first)
	assert.Equal(t, int64(2), r2.Number)
	r2.Phase, r2.Message, r2.HeldDeletes = revisions.PhaseHeld, "would delete 3 children", 3
	require.NoError(t, s.Record(ctx, r2))
	list, err := revisions.ListRevisions(ctx, s.Reader, s.Namespace, shelf)
	require.NoError(t, err)
	require.Len(t, list, 2)
	assert.Equal(t, 3, list[1].HeldDeletes)

	// The user approves it; the engine acts on it and clears the request,
	// and the held count with the phase.
	cr := &appsv1.ControllerRevision{}
	require.NoError(t, s.Reader.Get(ctx, keyOf(s, r2), cr))
	cr.Annotations[contract.AnnotationRolloutApproved] = "true"
	require.NoError(t, s.Client.Update(ctx, cr))
	r2.Phase, r2.Wave, r2.Message = revisions.PhaseProgressing, 1, "wave 2 of 2"
	require.NoError(t, s.Record(ctx, r2, contract.AnnotationRolloutApproved))
	require.NoError(t, s.Reader.Get(ctx, keyOf(s, r2), cr))
	assert.NotContains(t, cr.Annotations, contract.AnnotationRolloutApproved)
	assert.NotContains(t, cr.Annotations, contract.AnnotationRolloutHeldDeletes)
	got := revisions.RevisionOf(cr)
	assert.Equal(t, []any{revisions.PhaseProgressing, 1, "wave 2 of 2"}, []any{got.Phase, got.Wave, got.Message})

	// The files go back to revision 1's content: it is the newest again,
	// numbered next, pending, its requests cleared.
	require.NoError(t, s.Reader.Get(ctx, keyOf(s, r1), cr))
	cr.Annotations[contract.AnnotationRolloutUndo] = "true"
	require.NoError(t, s.Client.Update(ctx, cr))
	back, first, err := s.Ensure(ctx, v1)
	require.NoError(t, err)
	assert.False(t, first)
	assert.Equal(t, []any{int64(3), v1.Hash, revisions.PhasePending, "the files are revision 1's content again", false},
		[]any{back.Number, back.Hash, back.Phase, back.Message, back.Undo})

	r4, _, err := s.Ensure(ctx, v3)
	require.NoError(t, err)
	assert.Equal(t, int64(4), r4.Number)
	objects, err := s.List(ctx)
	require.NoError(t, err)
	var numbers []int64
	for i := range objects {
		numbers = append(numbers, objects[i].Revision)
	}
	assert.Equal(t, []int64{2, 3, 4}, numbers, "oldest first")

	// Loaded back: the same template.
	loaded, err := s.Load(&objects[2])
	require.NoError(t, err)
	assert.Equal(t, v3.Hash, loaded.Hash)

	// Beyond a limit of 1, the oldest go, but for those in use (the
	// engine's target, 4, and here 2, which a parent is pinned to).
	require.NoError(t, s.Prune(ctx, 1, func(r revisions.Revision) bool { return r.Number == 2 || r.Number == 4 }))
	list, err = revisions.ListRevisions(ctx, s.Reader, s.Namespace, shelf)
	require.NoError(t, err)
	numbers = nil
	for _, r := range list {
		numbers = append(numbers, r.Number)
	}
	assert.Equal(t, []int64{2, 4}, numbers)
}

// TestLoadRevisionOfAnotherKind: a revision holding another kind's template
// is refused.
func TestLoadRevisionOfAnotherKind(t *testing.T) {
	other := shelfTemplate(t, "Rack", "one")
	cr := revisions.ObjectOf("engine-system", shelf, revisions.Revision{Number: 5, Hash: other.Hash, Path: other.Path}, other.Files())
	_, err := revisions.LoadRevision(cr, shelf)
	assert.EqualError(t, err, "revision 5 (ControllerRevision engine-system/shelf.shelf.cuengine.dev-"+other.Hash+") is a template of Rack.shelf.cuengine.dev/v1, not Shelf.shelf.cuengine.dev/v1")
}

func keyOf(s *revisions.Store, rev revisions.Revision) client.ObjectKey {
	return client.ObjectKey{Namespace: s.Namespace, Name: rev.Name}
}
