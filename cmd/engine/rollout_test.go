package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/revisions"
	"github.com/cuengine/engine/templates/policy"
)

var myKindGVK = schema.GroupVersionKind{Group: "webapp.my.domain", Version: "v1", Kind: "MyKind"}

// storedRevision is a ControllerRevision as the engine records it
// (revisions.ObjectOf), with its rollout state, and the users' requests
// (annotations set to "true", as kubectl or engine rollout writes them).
func storedRevision(ns string, gvk schema.GroupVersionKind, number int64, hash string, phase revisions.Phase, wave int, message string, created time.Time, requests ...string) *appsv1.ControllerRevision {
	cr := revisions.ObjectOf(ns, gvk, revisions.Revision{
		Number: number, Hash: hash, Path: "mykind.cue", Created: created, Phase: phase, Wave: wave, Message: message, HeldDeletes: -1,
	}, nil)
	for _, a := range requests {
		cr.Annotations[a] = "true"
	}
	return cr
}

// myKind is a MyKind object as the engine leaves it: on a revision, with
// its conditions. number 0 is an object with no revision yet.
func myKind(name string, number int64, hash string, ready bool, stale bool, pin string) unstructured.Unstructured {
	u := unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(myKindGVK)
	u.SetNamespace("apps")
	u.SetName(name)
	u.SetUID(types.UID("uid-" + name))
	u.SetGeneration(2)
	if pin != "" {
		u.SetAnnotations(map[string]string{contract.AnnotationTemplateRevision: pin})
	}
	u.Object["status"] = parentStatus(number, hash, ready, stale)
	return u
}

func parentStatus(number int64, hash string, ready, stale bool) map[string]any {
	observed := int64(2)
	if stale {
		observed = 1
	}
	status := "False"
	if ready {
		status = "True"
	}
	st := map[string]any{
		"observedGeneration": observed,
		"conditions": []any{
			map[string]any{"type": contract.ConditionSynced, "status": "True", "reason": "Applied", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
			map[string]any{"type": contract.ConditionReady, "status": status, "reason": "Ready", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
		},
	}
	if number > 0 {
		st["templateRevision"] = map[string]any{"number": number, "hash": hash}
	}
	return st
}

// unsynced is an object whose Synced condition is False (its last apply
// failed) while its Ready is as it was: not healthy on its revision
// (revisions.ReadyOn), so not counted Ready.
func unsynced(u unstructured.Unstructured) unstructured.Unstructured {
	synced := u.Object["status"].(map[string]any)["conditions"].([]any)[0].(map[string]any)
	synced["status"], synced["reason"], synced["message"] = "False", "ApplyFailed", "admission webhook denied the request"
	status := u.Object["status"].(map[string]any)
	status["conditions"] = append(status["conditions"].([]any), map[string]any{"type": "Stalled", "status": "True", "reason": "ApplyFailed", "message": "admission webhook denied the request"})
	return u
}

func TestRolloutResolveKind(t *testing.T) {
	resources := []*metav1.APIResourceList{
		{GroupVersion: "webapp.my.domain/v1", APIResources: []metav1.APIResource{
			{Name: "mykinds", SingularName: "mykind", Namespaced: true, Kind: "MyKind", ShortNames: []string{"mk"}, Verbs: []string{"get", "list"}},
		}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
			{Name: "deployments", SingularName: "deployment", Namespaced: true, Kind: "Deployment", ShortNames: []string{"deploy"}, Verbs: []string{"get", "list"}},
		}},
		{GroupVersion: "a.example.com/v1", APIResources: []metav1.APIResource{
			{Name: "widgets", SingularName: "widget", Namespaced: true, Kind: "Widget", Verbs: []string{"get", "list"}},
		}},
		{GroupVersion: "b.example.com/v1", APIResources: []metav1.APIResource{
			{Name: "widgets", SingularName: "widget", Namespaced: true, Kind: "Widget", Verbs: []string{"get", "list"}},
		}},
	}
	for _, tc := range []struct {
		arg     string
		want    schema.GroupVersionKind
		wantErr string
	}{
		{arg: "MyKind", want: myKindGVK},
		{arg: "mykind", want: myKindGVK},
		{arg: "mykinds", want: myKindGVK},
		{arg: "mk", want: myKindGVK},
		{arg: "MyKind.webapp.my.domain", want: myKindGVK},
		{arg: "mykinds.webapp.my.domain", want: myKindGVK},
		{arg: "mykinds.v1.webapp.my.domain", want: myKindGVK},
		{arg: "MyKind.v1.webapp.my.domain", want: myKindGVK},
		{arg: "Widget.b.example.com", want: schema.GroupVersionKind{Group: "b.example.com", Version: "v1", Kind: "Widget"}},
		{arg: "Nope", wantErr: "unknown kind \"Nope\": the cluster serves no such resource (is its CRD installed? `kubectl api-resources` lists the kinds)"},
		{arg: "MyKind.other.domain", wantErr: "unknown kind \"MyKind.other.domain\": the cluster serves no such resource (is its CRD installed? `kubectl api-resources` lists the kinds)"},
		{arg: "widget", wantErr: `"widget" names several kinds (Widget.a.example.com, Widget.b.example.com): name one with its group`},
		{arg: "Widget", wantErr: `"Widget" names several kinds (Widget.a.example.com, Widget.b.example.com): name one with its group`},
	} {
		t.Run(tc.arg, func(t *testing.T) {
			dc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: resources}}
			got, err := resolveKind(context.Background(), kindMapper(dc), tc.arg)
			if tc.wantErr != "" {
				require.EqualError(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestRolloutSelectRevisions(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	v2 := myKindGVK.GroupKind().WithVersion("v2")
	other := schema.GroupVersionKind{Group: "webapp.my.domain", Version: "v1", Kind: "Mykind"} // a different kind with the same label
	otherRev := storedRevision("engine-system", other, 1, "ffffffffffff", revisions.PhaseComplete, 0, "", t0)

	t.Run("one namespace, oldest first", func(t *testing.T) {
		crs := []appsv1.ControllerRevision{
			*storedRevision("engine-system", myKindGVK, 2, "bbbbbbbbbbbb", revisions.PhaseProgressing, 1, "wave 2 of 3", t0.Add(time.Hour)),
			*otherRev,
			*storedRevision("engine-system", myKindGVK, 1, "aaaaaaaaaaaa", revisions.PhaseComplete, 0, "the first revision of the kind", t0),
		}
		kr, err := revisions.Select(crs, myKindGVK.GroupKind(), "")
		require.NoError(t, err)
		assert.Equal(t, "MyKind.webapp.my.domain/v1", kr.Kind)
		assert.Equal(t, "engine-system", kr.Namespace)
		require.Len(t, kr.Revisions, 2)
		assert.Equal(t, []int64{1, 2}, []int64{kr.Revisions[0].Number, kr.Revisions[1].Number})
		assert.Equal(t, "bbbbbbbbbbbb", kr.Target().Hash)
		assert.Equal(t, "revision 2 of MyKind.webapp.my.domain", revisionName(kr, kr.Target()))
	})
	t.Run("the template's current version", func(t *testing.T) {
		crs := []appsv1.ControllerRevision{
			*storedRevision("engine-system", myKindGVK, 1, "aaaaaaaaaaaa", revisions.PhaseComplete, 0, "", t0),
			*storedRevision("engine-system", myKindGVK, 2, "bbbbbbbbbbbb", revisions.PhaseComplete, 0, "", t0.Add(time.Hour)),
			*storedRevision("engine-system", v2, 1, "cccccccccccc", revisions.PhaseComplete, 0, "", t0.Add(2*time.Hour)),
		}
		kr, err := revisions.Select(crs, myKindGVK.GroupKind(), "")
		require.NoError(t, err)
		assert.Equal(t, "MyKind.webapp.my.domain/v2", kr.Kind)
		require.Len(t, kr.Revisions, 1)
		assert.Equal(t, "cccccccccccc", kr.Target().Hash)
	})
	t.Run("several namespaces", func(t *testing.T) {
		crs := []appsv1.ControllerRevision{
			*storedRevision("engine-system", myKindGVK, 1, "aaaaaaaaaaaa", revisions.PhaseComplete, 0, "", t0),
			*storedRevision("default", myKindGVK, 1, "aaaaaaaaaaaa", revisions.PhaseComplete, 0, "", t0),
		}
		_, err := revisions.Select(crs, myKindGVK.GroupKind(), "")
		require.EqualError(t, err, "revisions of MyKind.webapp.my.domain are in several namespaces (default, engine-system): choose the engine's with --revision-namespace")
	})
	t.Run("none", func(t *testing.T) {
		_, err := revisions.Select([]appsv1.ControllerRevision{*otherRev}, myKindGVK.GroupKind(), "")
		require.EqualError(t, err, "no revisions of MyKind.webapp.my.domain in any namespace: the engine records one when it serves the kind's template (is it running, with this kind's template?)")
		_, err = revisions.Select(nil, myKindGVK.GroupKind(), "engine-system")
		require.EqualError(t, err, "no revisions of MyKind.webapp.my.domain in namespace engine-system: the engine records one when it serves the kind's template (is it running, with this kind's template?)")
	})
}

// fleetFixture: revision 1 and 2 complete, 3 rolling out (paused in its
// second wave), and objects on each, one pinned, one not reconciled yet.
func fleetFixture(t *testing.T, targetPhase revisions.Phase, requests ...string) *revisions.Stored {
	t.Helper()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	crs := []appsv1.ControllerRevision{
		*storedRevision("engine-system", myKindGVK, 1, "aaaaaaaaaaaa", revisions.PhaseComplete, 0, "the first revision of the kind", t0),
		*storedRevision("engine-system", myKindGVK, 2, "bbbbbbbbbbbb", revisions.PhaseComplete, 0, "rolled out to every object at once (strategy Immediate)", t0.Add(time.Hour)),
		*storedRevision("engine-system", myKindGVK, 3, "cccccccccccc", targetPhase, 1, "wave 2 of 3", t0.Add(49*time.Hour), requests...),
	}
	kr, err := revisions.Select(crs, myKindGVK.GroupKind(), "engine-system")
	require.NoError(t, err)
	return kr
}

func fleetParents() []unstructured.Unstructured {
	return []unstructured.Unstructured{
		myKind("a", 2, "bbbbbbbbbbbb", true, false, ""),
		unsynced(myKind("b", 2, "bbbbbbbbbbbb", true, false, "")), // Ready, but its last apply failed
		myKind("c", 2, "bbbbbbbbbbbb", true, true, ""),            // Ready, but for an older generation
		myKind("d", 3, "cccccccccccc", true, false, ""),
		myKind("e", 3, "cccccccccccc", false, false, ""),
		myKind("f", 1, "aaaaaaaaaaaa", true, false, "1"),
		myKind("g", 0, "", false, false, ""),
		myKind("h", 2, "bbbbbbbbbbbb", false, false, "9"),
		myKind("i", 2, "bbbbbbbbbbbb", false, false, "two"),
		myKind("j", 0, "0123456789ab", false, false, ""),
	}
}

func TestRolloutStatusTable(t *testing.T) {
	parents := fleetParents()
	parents[len(parents)-1] = myKind("j", 7, "0123456789ab", true, false, "") // a revision pruned meanwhile
	waves := func(rev revisions.Revision) int {
		return map[string]int{"aaaaaaaaaaaa": 1, "bbbbbbbbbbbb": 1, "cccccccccccc": 3}[rev.Hash]
	}
	for _, tc := range []struct {
		name     string
		phase    revisions.Phase
		requests []string
		want     string
	}{{
		name: "paused", phase: revisions.PhaseProgressing, requests: []string{contract.AnnotationRolloutPaused},
		want: `MyKind.webapp.my.domain/v1: 10 objects, revisions in namespace engine-system
REVISION  HASH          PHASE         WAVE  OBJECTS  READY  STALLED  PINNED
1         aaaaaaaaaaaa  Complete      1/1   1        1      0        1
2         bbbbbbbbbbbb  Complete      1/1   5        1      1        0
3*        cccccccccccc  Paused        2/3   2        1      0        0
7         0123456789ab  (not stored)  -     1        1      0        0
1 object reports no revision yet (not reconciled since the engine records revisions)
1 object is pinned to revision 9, which is not stored: the engine does not reconcile them (RevisionNotFound)
1 object has an engine.cuengine.dev/template-revision annotation that is not a revision number
revision 3 (*) is paused at wave 2/3: ` + "`engine rollout resume mk`" + ` continues it
`,
	}, {
		name: "progressing", phase: revisions.PhaseProgressing,
		want: "3*        cccccccccccc  Progressing   2/3   2        1      0        0\n",
	}, {
		name: "held", phase: revisions.PhaseHeld,
		want: "3*        cccccccccccc  Held          -     2        1      0        0\n",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			kr := fleetFixture(t, tc.phase, tc.requests...)
			st := revisions.FleetOf(kr, parents, waves)
			var out bytes.Buffer
			printStatus(&out, st, "mk")
			assert.Contains(t, out.String(), tc.want)
			assert.Equal(t, 10, st.Objects)
			assert.Equal(t, int64(3), st.Target.Number)
		})
	}
}

func TestRolloutStatusMessages(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	held := `the new version of mykind.cue would delete 3 children (MyKind apps/a: Deployment apps/a); it waits for ` + "`engine rollout resume`"
	for _, tc := range []struct {
		phase   revisions.Phase
		message string
		want    string
	}{
		{revisions.PhaseHeld, held, "revision 2 (*) is held: " + held + "\n`engine rollout resume mykind` confirms it\n"},
		{revisions.PhaseRolledBack, "1 objects failed (more than maxFailures 0): apps/a: not Ready", "revision 2 (*) was rolled back: 1 objects failed (more than maxFailures 0): apps/a: not Ready\n"},
		{revisions.PhaseComplete, "rolled out in 3 waves", "revision 2 (*) is Complete: rolled out in 3 waves\n"},
		{revisions.PhasePending, "", "revision 2 (*) is Pending: the engine has not looked at it yet\n"},
	} {
		t.Run(string(tc.phase), func(t *testing.T) {
			kr, err := revisions.Select([]appsv1.ControllerRevision{
				*storedRevision("engine-system", myKindGVK, 1, "aaaaaaaaaaaa", revisions.PhaseComplete, 0, "", t0),
				*storedRevision("engine-system", myKindGVK, 2, "bbbbbbbbbbbb", tc.phase, 0, tc.message, t0),
			}, myKindGVK.GroupKind(), "")
			require.NoError(t, err)
			var out bytes.Buffer
			printStatus(&out, revisions.FleetOf(kr, nil, func(revisions.Revision) int { return 0 }), "mykind")
			assert.True(t, bytes.HasSuffix(out.Bytes(), []byte(tc.want)), out.String())
		})
	}
}

func TestRolloutHistoryTable(t *testing.T) {
	kr := fleetFixture(t, revisions.PhaseProgressing, contract.AnnotationRolloutPaused)
	now := time.Date(2026, 1, 3, 2, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	on := revisions.ObjectsOn(fleetParents())
	pv := pinView{pinned: revisions.PinnedTo(fleetParents()), pins: &policy.DefaultPins, newest: 3}
	printHistory(&out, kr, on, pv, now)
	assert.Equal(t, `REVISION  HASH          PHASE     CREATED  OBJECTS  PINNED  MESSAGE
1         aaaaaaaaaaaa  Complete  2d2h     1        1       the first revision of the kind
2         bbbbbbbbbbbb  Complete  2d1h     5        0       rolled out to every object at once (strategy Immediate)
3         cccccccccccc  Paused    60m      2        0       wave 2 of 3
pins: followed to revisions 1 to 3 (rollout: pins: newest: 10), not to a RolledBack or Held one; a refused pin keeps no revision from pruning
`, out.String())
	h := historyOf(kr, on, pv)
	require.Len(t, h, 3)
	assert.Equal(t, historyEntry{
		Name: "mykind.webapp.my.domain-cccccccccccc", Number: 3, Hash: "cccccccccccc", Phase: "Paused",
		Created: time.Date(2026, 1, 3, 1, 0, 0, 0, time.UTC), Objects: 2, Message: "wave 2 of 3", Paused: true,
	}, h[2])
	assert.Equal(t, 1, h[0].Pinned)
	assert.Empty(t, h[0].PinRefused)

	// Pins only to the newest two: the pin to revision 1 is refused.
	pv.pins = &policy.Pins{Newest: 2}
	out.Reset()
	printHistory(&out, kr, on, pv, now)
	assert.Contains(t, out.String(), "1         aaaaaaaaaaaa  Complete  2d2h     1        1 (refused)  the first revision of the kind\n")
	assert.True(t, strings.HasSuffix(out.String(), "pins: followed to revisions 2 to 3 (rollout: pins: newest: 2), not to a RolledBack or Held one; a refused pin keeps no revision from pruning\n"), out.String())
	assert.Equal(t, "the template's rollout policy allows pins only to revisions 2 to 3 (rollout: pins: newest: 2)", historyOf(kr, on, pv)[0].PinRefused)

	pv.pins = &policy.Pins{Forbid: true}
	out.Reset()
	printHistory(&out, kr, on, pv, now)
	assert.True(t, strings.HasSuffix(out.String(), "pins: none followed (rollout: pins: \"Forbid\")\n"), out.String())
}

// TestRolloutStatusFailingBefore: status names the objects that were
// failing before they moved to the target, a bounded list.
func TestRolloutStatusFailingBefore(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		failing []string
		want    string
	}{
		{"one", []string{"apps/t-3"}, "failing before the move to revision 2, not counted against it: apps/t-3\n"},
		{"many", []string{"a/1", "a/2", "a/3", "a/4", "a/5", "a/6", "a/7", "a/8", "a/9", "a/10", "a/11", "a/12"},
			"failing before the move to revision 2, not counted against it: a/1, a/2, a/3, a/4, a/5, a/6, a/7, a/8, a/9, a/10 and 2 more\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			two := revisions.ObjectOf("engine-system", myKindGVK, revisions.Revision{Number: 2, Hash: "bbbbbbbbbbbb", Path: "mykind.cue", Created: t0,
				Phase: revisions.PhaseComplete, Message: "rolled out in 2 waves", HeldDeletes: -1, FailingBefore: tc.failing}, nil)
			kr, err := revisions.Select([]appsv1.ControllerRevision{
				*storedRevision("engine-system", myKindGVK, 1, "aaaaaaaaaaaa", revisions.PhaseComplete, 0, "", t0), *two,
			}, myKindGVK.GroupKind(), "")
			require.NoError(t, err)
			st := revisions.FleetOf(kr, nil, func(revisions.Revision) int { return 0 })
			assert.Equal(t, tc.failing, st.Target.FailingBefore)
			var out bytes.Buffer
			printStatus(&out, st, "mykind")
			assert.True(t, strings.HasSuffix(out.String(), "revision 2 (*) is Complete: rolled out in 2 waves\n"+tc.want), out.String())
		})
	}
}

func TestRolloutRequests(t *testing.T) {
	held := "the new version of mykind.cue would delete 3 children (MyKind apps/a: Deployment apps/a); it waits"
	type want struct {
		annotations map[string]any
		done, err   string
	}
	for _, tc := range []struct {
		name     string
		phase    revisions.Phase
		message  string
		deletes  int // the held revision's count, when not 0
		requests []string
		pause    want
		resume   want
		undo     want
	}{{
		name: "progressing", phase: revisions.PhaseProgressing,
		pause:  want{annotations: map[string]any{contract.AnnotationRolloutPaused: "true"}, done: "revision 3 of MyKind.webapp.my.domain paused: no more objects move to it until `engine rollout resume mk`"},
		resume: want{err: "nothing to resume: revision 3 of MyKind.webapp.my.domain is Progressing and not paused"},
		undo:   want{annotations: map[string]any{contract.AnnotationRolloutUndo: "true"}, done: "revision 3 of MyKind.webapp.my.domain undone: the engine returns its objects to revision 2"},
	}, {
		name: "paused", phase: revisions.PhaseProgressing, requests: []string{contract.AnnotationRolloutPaused},
		pause:  want{err: "revision 3 of MyKind.webapp.my.domain is already paused; `engine rollout resume mk` continues it"},
		resume: want{annotations: map[string]any{contract.AnnotationRolloutPaused: nil}, done: "revision 3 of MyKind.webapp.my.domain resumed"},
		undo:   want{annotations: map[string]any{contract.AnnotationRolloutUndo: "true"}, done: "revision 3 of MyKind.webapp.my.domain undone: the engine returns its objects to revision 2"},
	}, {
		name: "held", phase: revisions.PhaseHeld, message: held, deletes: 3,
		pause:  want{err: "nothing to pause: revision 3 of MyKind.webapp.my.domain is Held, it waits for `engine rollout resume mk` to confirm its deletions"},
		resume: want{annotations: map[string]any{contract.AnnotationRolloutApproved: "true", contract.AnnotationRolloutPaused: nil}, done: "revision 3 of MyKind.webapp.my.domain approved: its rollout deletes 3 children"},
		undo:   want{err: "nothing to undo: revision 3 of MyKind.webapp.my.domain is Held and no object runs it; restore the previous template files to drop it"},
	}, {
		name: "held, its count not recorded", phase: revisions.PhaseHeld, message: held, deletes: -1,
		resume: want{annotations: map[string]any{contract.AnnotationRolloutApproved: "true", contract.AnnotationRolloutPaused: nil}, done: "revision 3 of MyKind.webapp.my.domain approved: its rollout deletes the children its message names"},
	}, {
		name: "held and approved", phase: revisions.PhaseHeld, message: held, requests: []string{contract.AnnotationRolloutApproved},
		resume: want{err: "revision 3 of MyKind.webapp.my.domain is already approved; the engine has not acted on it yet (is it running?)"},
	}, {
		name: "complete", phase: revisions.PhaseComplete,
		pause:  want{err: "nothing to pause: revision 3 of MyKind.webapp.my.domain is Complete"},
		resume: want{err: "nothing to resume: revision 3 of MyKind.webapp.my.domain is Complete"},
		undo:   want{annotations: map[string]any{contract.AnnotationRolloutUndo: "true"}, done: "revision 3 of MyKind.webapp.my.domain undone: the engine returns its objects to revision 2"},
	}, {
		name: "complete, undo requested", phase: revisions.PhaseComplete, requests: []string{contract.AnnotationRolloutUndo},
		undo: want{err: "undo of revision 3 of MyKind.webapp.my.domain is already requested; the engine has not acted on it yet (is it running?)"},
	}, {
		name: "rolled back", phase: revisions.PhaseRolledBack, message: "undone (engine rollout undo)",
		pause:  want{err: "nothing to pause: revision 3 of MyKind.webapp.my.domain is RolledBack"},
		resume: want{err: "nothing to resume: revision 3 of MyKind.webapp.my.domain is RolledBack"},
		undo:   want{err: "revision 3 of MyKind.webapp.my.domain is already rolled back: undone (engine rollout undo)"},
	}, {
		name: "pending", phase: revisions.PhasePending,
		pause: want{annotations: map[string]any{contract.AnnotationRolloutPaused: "true"}, done: "revision 3 of MyKind.webapp.my.domain paused: no more objects move to it until `engine rollout resume mk`"},
		undo:  want{err: "nothing to undo: revision 3 of MyKind.webapp.my.domain is Pending and no object runs it yet"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			kr := fleetFixture(t, tc.phase, tc.requests...)
			kr.Revisions[2].Message = tc.message
			if tc.deletes != 0 {
				kr.Revisions[2].HeldDeletes = tc.deletes
			}
			for _, step := range []struct {
				name string
				do   func(*revisions.Stored, string) (request, error)
				want want
			}{{"pause", pauseRequest, tc.pause}, {"resume", resumeRequest, tc.resume}, {"undo", undoRequest, tc.undo}} {
				if step.want.err == "" && step.want.done == "" {
					continue
				}
				req, err := step.do(kr, "mk")
				if step.want.err != "" {
					assert.EqualError(t, err, step.want.err, step.name)
					continue
				}
				if assert.NoError(t, err, step.name) {
					assert.Equal(t, step.want.annotations, req.annotations, step.name)
					assert.Equal(t, step.want.done, req.done, step.name)
				}
			}
		})
	}
}

// TestRolloutUndoWithoutACompleteRevision: with no other revision
// Complete, the engine returns the objects to the newest other one
// (revisions.UndoTarget), and undo says so; with no other revision at all,
// there is nothing to go back to.
func TestRolloutUndoWithoutACompleteRevision(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	kr, err := revisions.Select([]appsv1.ControllerRevision{
		*storedRevision("engine-system", myKindGVK, 1, "aaaaaaaaaaaa", revisions.PhaseRolledBack, 0, "", t0),
		*storedRevision("engine-system", myKindGVK, 2, "bbbbbbbbbbbb", revisions.PhaseSuperseded, 0, "", t0),
		*storedRevision("engine-system", myKindGVK, 3, "cccccccccccc", revisions.PhaseProgressing, 0, "", t0),
	}, myKindGVK.GroupKind(), "")
	require.NoError(t, err)
	req, err := undoRequest(kr, "mk")
	require.NoError(t, err)
	assert.Equal(t, "revision 3 of MyKind.webapp.my.domain undone: the engine returns its objects to revision 2 (Superseded: no other revision is Complete)", req.done)

	kr, err = revisions.Select([]appsv1.ControllerRevision{
		*storedRevision("engine-system", myKindGVK, 1, "aaaaaaaaaaaa", revisions.PhaseComplete, 0, "the first revision of the kind", t0),
	}, myKindGVK.GroupKind(), "")
	require.NoError(t, err)
	_, err = undoRequest(kr, "mk")
	assert.EqualError(t, err, "nothing to go back to: revision 1 of MyKind.webapp.my.domain is the kind's only stored revision (`engine rollout history mk`)")
}
