package rollout

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/revisions"
	"github.com/cuengine/engine/templates"
)

// fakeKind is a kind controller as its rollout sees it, locking as
// kindController does: status reads the rollout with the kind's lock
// held (as /readyz does), and listing children or enqueueing a parent
// takes that lock. duringList, when set, runs inside every children call,
// before the lock is taken: what the test does while a step lists.
type fakeKind struct {
	mu      sync.Mutex
	ro      *Rollout
	tpl     *templates.Template
	parents []unstructured.Unstructured

	duringList func()
	// sentTo records, for each parent enqueued, the revision number its
	// reconcile would get at that moment.
	sentTo map[string]int64
}

func (k *fakeKind) Template() *templates.Template {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.tpl
}

func (k *fakeKind) Fleet(context.Context) ([]unstructured.Unstructured, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]unstructured.Unstructured, len(k.parents))
	for i := range k.parents {
		out[i] = *k.parents[i].DeepCopy()
	}
	return out, nil
}

func (k *fakeKind) Children(context.Context, *unstructured.Unstructured) ([]client.Object, error) {
	if k.duringList != nil {
		k.duringList()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return nil, nil
}

func (k *fakeKind) Enqueue(p *unstructured.Unstructured) {
	k.mu.Lock()
	defer k.mu.Unlock()
	rev, err := k.ro.templateFor(p)
	if err == nil {
		k.sentTo[p.GetName()] = rev.Number
	}
}

func (k *fakeKind) RequeueAll(context.Context)                           {}
func (k *fakeKind) Event(runtime.Object, string, string, string, ...any) {}
func (k *fakeKind) Sharded() bool                                        { return false }
func (k *fakeKind) Coordinates() bool                                    { return true }

// Status is kindController.status: the rollout read under the kind's lock.
func (k *fakeKind) status() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	revision, _ := k.ro.Status()
	return revision
}

// lockTemplate compiles a Shelf template with a progressive rollout; note
// makes versions with different content.
func lockTemplate(t *testing.T, note string) *templates.Template {
	t.Helper()
	dir := t.TempDir()
	src := `parent: {apiVersion: "shelf.cuengine.dev/v1", kind: "Shelf"}
rollout: {strategy: "Progressive", waves: [1, "100%"]}
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

// TestRolloutStepBlocksNoReader: while a step lists children for its
// hold check (the kind's lock taken inside), the kind's status and a
// reconcile's templateFor answer at once, and a parent sent to the target
// is reconciled with the target. On the engine of a165818 the step held
// the rollout's lock across that list while status held the kind's lock
// and waited for the rollout's: /readyz froze the kind for good.
func TestRolloutStepBlocksNoReader(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, appsv1.AddToScheme(scheme))
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	v1 := lockTemplate(t, "one")
	k := &fakeKind{tpl: v1, sentTo: map[string]int64{}}
	store := &revisions.Store{Client: c, Reader: c, Namespace: "default", GVK: v1.GVK}
	k.ro = New(k, v1.GVK, store, 10, Hold{Limits: render.Limits{EvaluationTimeout: time.Second}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, k.ro.Init(ctx))
	first, err := revisions.ListRevisions(ctx, c, "default", v1.GVK)
	require.NoError(t, err)
	require.Len(t, first, 1)

	for i := range 5 {
		p := rolloutParent(fmt.Sprintf("p%d", i), first[0].Hash, metav1.ConditionTrue, metav1.ConditionTrue)
		p.Object["status"].(map[string]any)["templateRevision"] = map[string]any{"number": int64(1), "hash": first[0].Hash}
		k.parents = append(k.parents, *p)
	}

	// A reader during every list: status and templateFor, each bounded,
	// as a /readyz poll and a reconcile would be.
	var readers sync.WaitGroup
	var blocked []string
	var blockedMu sync.Mutex
	k.duringList = func() {
		readers.Add(1)
		done := make(chan struct{})
		go func() {
			defer readers.Done()
			defer close(done)
			k.status()
			_, _ = k.ro.templateFor(&k.parents[0])
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			blockedMu.Lock()
			blocked = append(blocked, "status and templateFor waited for the step's list")
			blockedMu.Unlock()
		}
	}

	k.mu.Lock()
	k.tpl = lockTemplate(t, "two")
	k.mu.Unlock()
	// Steps until the canary is sent; a steady reader beside them, under -race.
	stop := make(chan struct{})
	var steady sync.WaitGroup
	steady.Add(1)
	go func() {
		defer steady.Done()
		for {
			select {
			case <-stop:
				return
			default:
				k.status()
			}
		}
	}()
	for range 3 {
		_, err := k.ro.step(ctx)
		require.NoError(t, err)
	}
	close(stop)
	steady.Wait()
	readers.Wait()
	assert.Empty(t, blocked)

	revs, err := revisions.ListRevisions(ctx, c, "default", v1.GVK)
	require.NoError(t, err)
	require.Len(t, revs, 2)
	assert.Equal(t, revisions.PhaseProgressing, revs[1].Phase, "the hold check found nothing to delete: the rollout began")
	require.Len(t, k.sentTo, 1, "the first wave is one canary")
	for name, n := range k.sentTo {
		assert.Equal(t, int64(2), n, "%s, enqueued, is reconciled with the target", name)
	}
	assert.Contains(t, k.status(), "2 (")
}

// TestRolloutViewIsACopy: what a reconcile got from templateFor does
// not change under it when the coordinator moves on.
func TestRolloutViewIsACopy(t *testing.T) {
	ro := testRollout(revisions.PhaseProgressing, 0)
	on2 := rolloutParent("on2", "h2", metav1.ConditionTrue, metav1.ConditionTrue)
	got, err := ro.templateFor(on2)
	require.NoError(t, err)
	ro.target.Phase, ro.target.Message = revisions.PhaseRolledBack, "failed"
	assert.Equal(t, revisions.PhaseProgressing, got.Phase, "not changed before it is published")
	ro.publish()
	assert.Equal(t, revisions.PhaseProgressing, got.Phase, "nor after")
	again, err := ro.templateFor(on2)
	require.NoError(t, err)
	assert.Equal(t, int64(1), again.Number, "a later reconcile sees the rollback")
}

// TestRolloutNotLoaded: a reconcile before the revisions are loaded is
// an error to retry, not a nil revision, nor a panic on a view with no
// target.
func TestRolloutNotLoaded(t *testing.T) {
	ro := New(&fakeKind{}, shelfKind, nil, 10, Hold{})
	_, err := ro.templateFor(rolloutParent("p", "h1", metav1.ConditionTrue, metav1.ConditionTrue))
	require.Error(t, err)
	assert.False(t, errors.As(err, new(*render.Error)), "retried, not terminal")

	ro.publish() // an Init that failed before it had a target publishes one without
	_, err = ro.templateFor(rolloutParent("p", "h1", metav1.ConditionTrue, metav1.ConditionTrue))
	assert.ErrorContains(t, err, "not loaded yet", "an error, not a nil target")
}

var shelfKind = schema.GroupVersionKind{Group: "shelf.cuengine.dev", Version: "v1", Kind: "Shelf"}
