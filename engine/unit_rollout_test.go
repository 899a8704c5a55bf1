package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

// rolloutParent is a parent of generation 1 whose status says it runs
// revision hash (none when ""), with the given Synced and Ready.
func rolloutParent(name, hash string, synced, ready metav1.ConditionStatus) *unstructured.Unstructured {
	p := &unstructured.Unstructured{Object: map[string]any{}}
	p.SetName(name)
	p.SetNamespace("ns")
	p.SetUID(types.UID("uid-" + name))
	p.SetGeneration(1)
	status := map[string]any{"observedGeneration": int64(1), "conditions": []any{
		map[string]any{"type": contract.ConditionSynced, "status": string(synced), "reason": "R", "message": "synced message"},
		map[string]any{"type": contract.ConditionReady, "status": string(ready), "reason": "R", "message": "ready message"},
	}}
	if hash != "" {
		status["templateRevision"] = map[string]any{"number": int64(len(hash)), "hash": hash}
	}
	p.Object["status"] = status
	return p
}

// testRollout is a rollout with revisions 1 (complete) and 2 (the target,
// in the given phase and wave), without a cluster.
func testRollout(phase Phase, wave int) *rollout {
	one := &loadedRevision{Revision: Revision{Number: 1, Hash: "h1", Phase: PhaseComplete}, tpl: &templates.Template{Path: "v1"}}
	two := &loadedRevision{Revision: Revision{Number: 2, Hash: "h2", Phase: phase, Wave: wave}, tpl: &templates.Template{Path: "v2"}}
	ro := newRollout(&fakeKind{}, schema.GroupVersionKind{Kind: "Test"}, nil, 10, holdCheck{})
	ro.revs = map[string]*loadedRevision{"h1": one, "h2": two}
	ro.target = two
	ro.restable()
	ro.publish()
	return ro
}

// TestUnitTemplateFor: which revision each parent is reconciled with, by
// the phase of the rollout, whether the parent was moved, is new or pinned.
func TestUnitTemplateFor(t *testing.T) {
	on1 := rolloutParent("on1", "h1", metav1.ConditionTrue, metav1.ConditionTrue)
	on2 := rolloutParent("on2", "h2", metav1.ConditionTrue, metav1.ConditionTrue)
	fresh := rolloutParent("fresh", "", metav1.ConditionUnknown, metav1.ConditionUnknown)
	pinned := rolloutParent("pinned", "h2", metav1.ConditionTrue, metav1.ConditionTrue)
	pinned.SetAnnotations(map[string]string{contract.AnnotationTemplateRevision: "1"})
	for _, tt := range []struct {
		name   string
		phase  Phase
		wave   int
		moved  bool
		parent *unstructured.Unstructured
		want   int64
	}{
		{"complete: everyone on the target", PhaseComplete, 2, false, on1, 2},
		{"progressing: a parent not moved stays", PhaseProgressing, 0, false, on1, 1},
		{"progressing: a moved parent goes", PhaseProgressing, 0, true, on1, 2},
		{"progressing: a parent on the target stays there", PhaseProgressing, 0, false, on2, 2},
		{"progressing, first wave: a new parent gets the stable one", PhaseProgressing, 0, false, fresh, 1},
		{"progressing, past the first wave: a new parent gets the target", PhaseProgressing, 1, false, fresh, 2},
		{"held: a new parent gets the stable one", PhaseHeld, 0, false, fresh, 1},
		{"held: nobody moves", PhaseHeld, 0, false, on1, 1},
		{"pending: a parent already on its content stays", PhasePending, 0, false, on2, 2},
		{"rolled back: back to the stable one", PhaseRolledBack, 0, false, on2, 1},
		{"pinned: whatever the rollout", PhaseComplete, 2, false, pinned, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ro := testRollout(tt.phase, tt.wave)
			if tt.moved {
				ro.moving[tt.parent.GetUID()] = time.Now()
				ro.publish()
			}
			got, err := ro.templateFor(tt.parent)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got.Number)
		})
	}

	t.Run("pinned to a revision that is not stored", func(t *testing.T) {
		p := on1.DeepCopy()
		p.SetAnnotations(map[string]string{contract.AnnotationTemplateRevision: "7"})
		_, err := testRollout(PhaseComplete, 0).templateFor(p)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "pinned (engine.cuengine.dev/template-revision) to revision 7, which is not stored")
		var refused *render.Error // terminal, with its reason (the reconciler's classify)
		require.ErrorAs(t, err, &refused)
		assert.Equal(t, contract.ReasonRevisionNotFound, refused.Reason)
	})
	t.Run("pinned to something that is not a number", func(t *testing.T) {
		p := on1.DeepCopy()
		p.SetAnnotations(map[string]string{contract.AnnotationTemplateRevision: "latest"})
		_, err := testRollout(PhaseComplete, 0).templateFor(p)
		assert.ErrorContains(t, err, `annotation engine.cuengine.dev/template-revision="latest" is not a revision number`)
	})
}

// TestUnitRolloutOrder: canaries first, then a stable order by UID; pinned
// and deleted parents take no part.
func TestUnitRolloutOrder(t *testing.T) {
	var parents []unstructured.Unstructured
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		parents = append(parents, *rolloutParent(name, "h1", metav1.ConditionTrue, metav1.ConditionTrue))
	}
	parents[3].SetLabels(map[string]string{contract.LabelCanary: "true"})
	parents[1].SetAnnotations(map[string]string{contract.AnnotationTemplateRevision: "1"})
	now := metav1.Now()
	parents[4].SetDeletionTimestamp(&now)

	names := func(ps []*unstructured.Unstructured) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.GetName())
		}
		return out
	}
	first := names(rolloutOrder(parents))
	require.Len(t, first, 3)
	assert.Equal(t, "d", first[0], "the canary first")
	assert.ElementsMatch(t, []string{"a", "c", "d"}, first)
	// The same order whatever order the cache lists them in.
	reversed := make([]unstructured.Unstructured, len(parents))
	for i := range parents {
		reversed[len(parents)-1-i] = parents[i]
	}
	assert.Equal(t, first, names(rolloutOrder(reversed)))
}

// TestUnitHealthGates: a moved parent passes when it is Ready on the
// revision, fails at once when Synced=False on it, and fails when it is not
// Ready by the deadline.
func TestUnitHealthGates(t *testing.T) {
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	within, past := since.Add(10*time.Second), since.Add(time.Minute)
	const deadline = 30 * time.Second

	ready := rolloutParent("ready", "h2", metav1.ConditionTrue, metav1.ConditionTrue)
	assert.True(t, readyOn(ready, "h2"))
	assert.False(t, readyOn(ready, "h1"), "ready, but on another revision")
	assert.Empty(t, failedOn(ready, "h2", since, past, deadline))

	refused := rolloutParent("refused", "h2", metav1.ConditionFalse, metav1.ConditionFalse)
	assert.Equal(t, "Synced=False R: synced message", failedOn(refused, "h2", since, within, deadline))

	waiting := rolloutParent("waiting", "h2", metav1.ConditionTrue, metav1.ConditionFalse)
	assert.Empty(t, failedOn(waiting, "h2", since, within, deadline))
	assert.Equal(t, "not Ready 30s after its update (progressDeadline): Ready=False R: ready message", failedOn(waiting, "h2", since, past, deadline))

	notMoved := rolloutParent("stuck", "h1", metav1.ConditionTrue, metav1.ConditionTrue)
	assert.Empty(t, failedOn(notMoved, "h2", since, within, deadline))
	assert.Equal(t, "not Ready 30s after its update (progressDeadline): not updated to the revision", failedOn(notMoved, "h2", since, past, deadline))

	stale := rolloutParent("stale", "h2", metav1.ConditionTrue, metav1.ConditionTrue)
	stale.SetGeneration(2)
	assert.False(t, readyOn(stale, "h2"), "its status is of an older generation")
}

// TestUnitRolloutIdleListsNoFleet: the coordinator lists every parent (under
// sharding, from the apiserver) only in the phases that move some.
func TestUnitRolloutIdleListsNoFleet(t *testing.T) {
	for _, tc := range []struct {
		rev  Revision
		want bool
	}{
		{Revision{Phase: PhasePending}, true},
		{Revision{Phase: PhaseProgressing}, true},
		{Revision{Phase: PhaseProgressing, Paused: true}, true},
		{Revision{Phase: PhaseHeld}, false},
		{Revision{Phase: PhaseHeld, Approved: true}, true},
		{Revision{Phase: PhaseHeld, Undo: true}, true},
		{Revision{Phase: PhaseComplete}, false},
		{Revision{Phase: PhaseComplete, Undo: true}, true},
		{Revision{Phase: PhaseRolledBack}, false},
		{Revision{Phase: PhaseSuperseded}, false},
	} {
		ro := &rollout{target: &loadedRevision{Revision: tc.rev}}
		assert.Equal(t, tc.want, ro.moves(), "%+v", tc.rev)
	}
}
