package rollout

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/revisions"
	"github.com/cuengine/engine/templates"
	"github.com/cuengine/engine/templates/policy"
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
func testRollout(phase revisions.Phase, wave int) *Rollout {
	one := &loadedRevision{Revision: revisions.Revision{Number: 1, Hash: "h1", Phase: revisions.PhaseComplete}, tpl: &templates.Template{Path: "v1"}}
	two := &loadedRevision{Revision: revisions.Revision{Number: 2, Hash: "h2", Phase: phase, Wave: wave}, tpl: &templates.Template{Path: "v2"}}
	ro := New(&fakeKind{}, schema.GroupVersionKind{Kind: "Test"}, nil, 10, Hold{})
	ro.revs = map[string]*loadedRevision{"h1": one, "h2": two}
	ro.target = two
	ro.restable()
	ro.publish()
	return ro
}

// TestTemplateFor: which revision each parent is reconciled with, by
// the phase of the rollout, whether the parent was moved, is new or pinned.
func TestTemplateFor(t *testing.T) {
	on1 := rolloutParent("on1", "h1", metav1.ConditionTrue, metav1.ConditionTrue)
	on2 := rolloutParent("on2", "h2", metav1.ConditionTrue, metav1.ConditionTrue)
	fresh := rolloutParent("fresh", "", metav1.ConditionUnknown, metav1.ConditionUnknown)
	pinned := rolloutParent("pinned", "h2", metav1.ConditionTrue, metav1.ConditionTrue)
	pinned.SetAnnotations(map[string]string{contract.AnnotationTemplateRevision: "1"})
	for _, tt := range []struct {
		name   string
		phase  revisions.Phase
		wave   int
		moved  bool
		parent *unstructured.Unstructured
		want   int64
	}{
		{"complete: everyone on the target", revisions.PhaseComplete, 2, false, on1, 2},
		{"progressing: a parent not moved stays", revisions.PhaseProgressing, 0, false, on1, 1},
		{"progressing: a moved parent goes", revisions.PhaseProgressing, 0, true, on1, 2},
		{"progressing: a parent on the target stays there", revisions.PhaseProgressing, 0, false, on2, 2},
		{"progressing, first wave: a new parent gets the stable one", revisions.PhaseProgressing, 0, false, fresh, 1},
		{"progressing, past the first wave: a new parent gets the target", revisions.PhaseProgressing, 1, false, fresh, 2},
		{"held: a new parent gets the stable one", revisions.PhaseHeld, 0, false, fresh, 1},
		{"held: nobody moves", revisions.PhaseHeld, 0, false, on1, 1},
		{"pending: a parent already on its content stays", revisions.PhasePending, 0, false, on2, 2},
		{"rolled back: back to the stable one", revisions.PhaseRolledBack, 0, false, on2, 1},
		{"pinned: whatever the rollout", revisions.PhaseComplete, 2, false, pinned, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ro := testRollout(tt.phase, tt.wave)
			if tt.moved {
				ro.moving[tt.parent.GetUID()] = move{since: time.Now()}
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
		_, err := testRollout(revisions.PhaseComplete, 0).templateFor(p)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "pinned (engine.cuengine.dev/template-revision) to revision 7, which is not stored")
		var pe *revisions.PinError
		require.ErrorAs(t, err, &pe, "a pin not followed, for the reconciler")
	})
	t.Run("pins the policy does not follow", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			pins   policy.Pins
			phase  revisions.Phase // of revision 2, the target
			pin    string
			reason string
		}{
			{"forbidden", policy.Pins{Forbid: true}, revisions.PhaseComplete, "1",
				`the object is pinned (engine.cuengine.dev/template-revision) to revision 1, which the engine does not run: the template's rollout policy forbids pins (rollout: pins: "Forbid")`},
			{"older than the newest allowed", policy.Pins{Newest: 1}, revisions.PhaseComplete, "1",
				`the object is pinned (engine.cuengine.dev/template-revision) to revision 1, which the engine does not run: the template's rollout policy allows pins only to revisions 2 to 2 (rollout: pins: newest: 1)`},
			{"rolled back", policy.DefaultPins, revisions.PhaseRolledBack, "2",
				`the object is pinned (engine.cuengine.dev/template-revision) to revision 2, which the engine does not run: revision 2 was rolled back and is not run again (failed)`},
			{"held", policy.DefaultPins, revisions.PhaseHeld, "2",
				"the object is pinned (engine.cuengine.dev/template-revision) to revision 2, which the engine does not run: revision 2 is held, waiting for `engine rollout resume` to confirm it (failed)"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ro := testRollout(tc.phase, 0)
				ro.target.tpl = &templates.Template{Path: "v2", Rollout: policy.Rollout{Pins: tc.pins}}
				ro.target.Message = "failed"
				ro.publish()
				p := on1.DeepCopy()
				p.SetAnnotations(map[string]string{contract.AnnotationTemplateRevision: tc.pin})
				_, err := ro.templateFor(p)
				var pe *revisions.PinError
				require.ErrorAs(t, err, &pe)
				assert.EqualError(t, err, tc.reason)
			})
		}
	})
	t.Run("pinned to something that is not a number", func(t *testing.T) {
		p := on1.DeepCopy()
		p.SetAnnotations(map[string]string{contract.AnnotationTemplateRevision: "latest"})
		_, err := testRollout(revisions.PhaseComplete, 0).templateFor(p)
		assert.ErrorContains(t, err, `annotation engine.cuengine.dev/template-revision="latest" is not a revision number`)
		var pe *revisions.PinError
		require.ErrorAs(t, err, &pe)
	})
}

// TestRolloutOrder: canaries first, then a stable order by UID; pinned,
// paused and deleted parents take no part.
func TestRolloutOrder(t *testing.T) {
	var parents []unstructured.Unstructured
	for _, name := range []string{"a", "b", "c", "d", "e", "f"} {
		parents = append(parents, *rolloutParent(name, "h1", metav1.ConditionTrue, metav1.ConditionTrue))
	}
	parents[3].SetLabels(map[string]string{contract.LabelCanary: "true"})
	parents[1].SetAnnotations(map[string]string{contract.AnnotationTemplateRevision: "1"})
	now := metav1.Now()
	parents[4].SetDeletionTimestamp(&now)
	// A paused parent would never become healthy on the target, and hold
	// its wave until the progress deadline rolled everything back.
	parents[5].SetAnnotations(map[string]string{contract.AnnotationPaused: "true"})

	names := func(ps []*unstructured.Unstructured) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.GetName())
		}
		return out
	}
	first := names(rolloutOrder(parents, policy.Canary{ObjectLabel: true}))
	require.Len(t, first, 3)
	assert.Equal(t, "d", first[0], "the canary first")
	assert.ElementsMatch(t, []string{"a", "c", "d"}, first)
	// The same order whatever order the cache lists them in.
	reversed := make([]unstructured.Unstructured, len(parents))
	for i := range parents {
		reversed[len(parents)-1-i] = parents[i]
	}
	assert.Equal(t, first, names(rolloutOrder(reversed, policy.Canary{ObjectLabel: true})))
}

// TestHealthGates: a moved parent passes when it is healthy on the
// revision (revisions.ReadyOn, whose own cases are revisions'
// TestReadyOn), fails at once when Synced=False on it, and fails when it
// is not healthy by the deadline.
func TestHealthGates(t *testing.T) {
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	within, past := since.Add(10*time.Second), since.Add(time.Minute)
	const deadline = 30 * time.Second

	ready := rolloutParent("ready", "h2", metav1.ConditionTrue, metav1.ConditionTrue)
	assert.Empty(t, failedOn(ready, "h2", since, past, deadline))

	refused := rolloutParent("refused", "h2", metav1.ConditionFalse, metav1.ConditionFalse)
	assert.Equal(t, "Synced=False R: synced message", failedOn(refused, "h2", since, within, deadline))

	waiting := rolloutParent("waiting", "h2", metav1.ConditionTrue, metav1.ConditionFalse)
	assert.Empty(t, failedOn(waiting, "h2", since, within, deadline))
	assert.Equal(t, "not Ready 30s after its update (progressDeadline): Ready=False R: ready message", failedOn(waiting, "h2", since, past, deadline))

	notMoved := rolloutParent("stuck", "h1", metav1.ConditionTrue, metav1.ConditionTrue)
	assert.Empty(t, failedOn(notMoved, "h2", since, within, deadline))
	assert.Equal(t, "not Ready 30s after its update (progressDeadline): not updated to the revision", failedOn(notMoved, "h2", since, past, deadline))
}

// TestRolloutIdleListsNoFleet: the coordinator lists every parent (under
// sharding, from the apiserver) only in the phases that move some.
func TestRolloutIdleListsNoFleet(t *testing.T) {
	for _, tc := range []struct {
		rev  revisions.Revision
		want bool
	}{
		{revisions.Revision{Phase: revisions.PhasePending}, true},
		{revisions.Revision{Phase: revisions.PhaseProgressing}, true},
		{revisions.Revision{Phase: revisions.PhaseProgressing, Paused: true}, true},
		{revisions.Revision{Phase: revisions.PhaseHeld}, false},
		{revisions.Revision{Phase: revisions.PhaseHeld, Approved: true}, true},
		{revisions.Revision{Phase: revisions.PhaseHeld, Undo: true}, true},
		{revisions.Revision{Phase: revisions.PhaseComplete}, false},
		{revisions.Revision{Phase: revisions.PhaseComplete, Undo: true}, true},
		{revisions.Revision{Phase: revisions.PhaseRolledBack}, false},
		{revisions.Revision{Phase: revisions.PhaseSuperseded}, false},
	} {
		ro := &Rollout{target: &loadedRevision{Revision: tc.rev}}
		assert.Equal(t, tc.want, ro.moves(), "%+v", tc.rev)
	}
}

// TestRollBackTo: a rolled-back target's parents go where an undo
// returns them (revisions.UndoTarget): the newest complete revision; when
// none is complete, the newest other one; when there is none, nowhere. A
// leader that reads the rollout back (restarted, or a shard following)
// sends them, and new parents, to the same one.
func TestRollBackTo(t *testing.T) {
	for _, tc := range []struct {
		name   string
		phases []revisions.Phase // of revisions 1, 2, ...; the last is the target
		want   int64
	}{
		{"the newest complete", []revisions.Phase{revisions.PhaseComplete, revisions.PhaseComplete, revisions.PhaseRolledBack, revisions.PhaseProgressing}, 2},
		{"undone once complete", []revisions.Phase{revisions.PhaseComplete, revisions.PhaseComplete}, 1},
		{"none complete: the newest other", []revisions.Phase{revisions.PhaseSuperseded, revisions.PhaseRolledBack, revisions.PhaseProgressing}, 2},
		{"the only revision: it stays", []revisions.Phase{revisions.PhaseProgressing}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scheme := runtime.NewScheme()
			require.NoError(t, appsv1.AddToScheme(scheme))
			c := fake.NewClientBuilder().WithScheme(scheme).Build()
			k := &fakeKind{sentTo: map[string]int64{}}
			k.ro = New(k, schema.GroupVersionKind{Kind: "Test"}, &revisions.Store{Client: c, Reader: c, Namespace: "default"}, 10, Hold{})
			for i, phase := range tc.phases {
				n := int64(i + 1)
				hash := fmt.Sprintf("h%d", n)
				lr := &loadedRevision{Revision: revisions.Revision{Name: "test-" + hash, Number: n, Hash: hash, Phase: phase}, tpl: &templates.Template{Path: hash}}
				k.ro.revs[hash] = lr
				k.ro.target = lr
				require.NoError(t, c.Create(context.Background(), &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: lr.Name, Namespace: "default"}, Revision: n}))
			}
			k.ro.restable()
			k.ro.publish()
			on := rolloutParent("on-target", k.ro.target.Hash, metav1.ConditionTrue, metav1.ConditionFalse)
			require.NoError(t, k.ro.rollBack(context.Background(), []unstructured.Unstructured{*on}, "failed"))
			assert.Equal(t, revisions.PhaseRolledBack, k.ro.target.Phase)
			assert.Equal(t, tc.want, k.sentTo["on-target"], "the revision its reconcile gets")

			// A restarted leader, or a shard that follows, reads the
			// rolled-back target from the store: the same revision.
			again := New(k, schema.GroupVersionKind{Kind: "Test"}, nil, 10, Hold{})
			for hash, lr := range k.ro.revs {
				c := *lr
				again.revs[hash] = &c
			}
			again.target = again.revs[k.ro.target.Hash]
			again.restable()
			again.publish()
			for _, p := range []*unstructured.Unstructured{on, rolloutParent("new", "", metav1.ConditionUnknown, metav1.ConditionUnknown)} {
				got, err := again.templateFor(p)
				require.NoError(t, err)
				assert.Equal(t, tc.want, got.Number, "%s, read back", p.GetName())
			}
		})
	}
}
