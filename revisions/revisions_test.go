package revisions_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/revisions"
)

var myKind = schema.GroupVersionKind{Group: "webapp.my.domain", Version: "v1", Kind: "MyKind"}

func TestRevisionName(t *testing.T) {
	for _, tc := range []struct {
		gvk  schema.GroupVersionKind
		hash string
		want string
	}{
		{myKind, "0123456789ab", "mykind.webapp.my.domain-0123456789ab"},
		// The version is not part of it: a revision keeps its name when
		// the template's version changes.
		{myKind.GroupKind().WithVersion("v2"), "0123456789ab", "mykind.webapp.my.domain-0123456789ab"},
		// A long kind: its label's digest, the names in clusters.
		{schema.GroupVersionKind{Group: "a-very-long-group-name.for-testing.example.com", Version: "v1", Kind: "AnExtremelyLongKindName"}, "0123456789ab",
			"anextremelylongkindname.a-very-long-group-name.for-193440609b85-0123456789ab"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			got := revisions.RevisionName(tc.gvk, tc.hash)
			assert.Equal(t, tc.want, got)
			assert.Empty(t, validation.IsDNS1123Subdomain(got), "an object name")
		})
	}
}

func TestRevisionOf(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	stored := func(annotations map[string]string) *appsv1.ControllerRevision {
		a := map[string]string{
			contract.AnnotationTemplateKind: "MyKind.webapp.my.domain/v1",
			contract.AnnotationTemplatePath: "mykind.cue",
			contract.AnnotationTemplateHash: "0123456789ab",
		}
		for k, v := range annotations {
			a[k] = v
		}
		return &appsv1.ControllerRevision{
			ObjectMeta: metav1.ObjectMeta{Name: "mykind.webapp.my.domain-0123456789ab", CreationTimestamp: metav1.NewTime(created), Annotations: a},
			Revision:   3,
		}
	}
	base := revisions.Revision{
		Name: "mykind.webapp.my.domain-0123456789ab", Kind: "MyKind.webapp.my.domain/v1", Number: 3, Hash: "0123456789ab", Path: "mykind.cue",
		Created: created, Phase: revisions.PhasePending, HeldDeletes: -1,
	}
	with := func(f func(*revisions.Revision)) revisions.Revision {
		r := base
		f(&r)
		return r
	}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        revisions.Revision
	}{
		{"just recorded: Pending", nil, base},
		{"progressing", map[string]string{
			contract.AnnotationRolloutPhase: "Progressing", contract.AnnotationRolloutWave: "1", contract.AnnotationRolloutMessage: "wave 2 of 3",
		}, with(func(r *revisions.Revision) { r.Phase, r.Wave, r.Message = revisions.PhaseProgressing, 1, "wave 2 of 3" })},
		{"a wave that is not a number", map[string]string{contract.AnnotationRolloutPhase: "Progressing", contract.AnnotationRolloutWave: "two"},
			with(func(r *revisions.Revision) { r.Phase = revisions.PhaseProgressing })},
		{"held, with its count", map[string]string{contract.AnnotationRolloutPhase: "Held", contract.AnnotationRolloutHeldDeletes: "400"},
			with(func(r *revisions.Revision) { r.Phase, r.HeldDeletes = revisions.PhaseHeld, 400 })},
		{"held by an engine that did not record the count", map[string]string{contract.AnnotationRolloutPhase: "Held"},
			with(func(r *revisions.Revision) { r.Phase = revisions.PhaseHeld })},
		{"the users' requests", map[string]string{
			contract.AnnotationRolloutPaused: "true", contract.AnnotationRolloutApproved: "true", contract.AnnotationRolloutUndo: "true",
		}, with(func(r *revisions.Revision) { r.Paused, r.Approved, r.Undo = true, true, true })},
		{"requests are \"true\", nothing else", map[string]string{
			contract.AnnotationRolloutPaused: "yes", contract.AnnotationRolloutApproved: "True", contract.AnnotationRolloutUndo: "",
		}, base},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, revisions.RevisionOf(stored(tc.annotations)))
		})
	}
}

// TestObjectOf: RevisionOf reads back what ObjectOf writes.
func TestObjectOf(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, rev := range []revisions.Revision{
		{Number: 1, Hash: "aaaaaaaaaaaa", Path: "mykind.cue", Phase: revisions.PhaseComplete, Message: "the first revision of the kind", HeldDeletes: -1},
		{Number: 2, Hash: "bbbbbbbbbbbb", Path: "kinds/mykind.cue", Created: created, Phase: revisions.PhaseProgressing, Wave: 2, Message: "wave 3 of 4", Paused: true, HeldDeletes: -1,
			FailingBefore: []string{"default/t-3", "team-a/web"}},
		{Number: 3, Hash: "cccccccccccc", Path: "mykind.cue", Phase: revisions.PhaseHeld, HeldDeletes: 0, Approved: true},
		{Number: 4, Hash: "dddddddddddd", Path: "mykind.cue", Phase: revisions.PhaseHeld, HeldDeletes: -1},
		{Number: 5, Hash: "eeeeeeeeeeee", Path: "mykind.cue", Phase: revisions.PhaseComplete, HeldDeletes: -1, Undo: true},
		{Number: 6, Hash: "ababababab12", Path: "mykind.cue", Phase: revisions.PhaseProgressing, Wave: 1, HeldDeletes: -1, SoakSince: created.Add(1500 * time.Millisecond),
			Analysis: []string{"analysis errors passed: x is 0.01, the condition is < 0.05", "analysis p99 held: the query y returned no data (no data is not success)"}},
	} {
		t.Run(rev.Hash, func(t *testing.T) {
			cr := revisions.ObjectOf("engine-system", myKind, rev, map[string]string{rev.Path: "// a template"})
			assert.Equal(t, "engine-system", cr.Namespace)
			assert.Equal(t, map[string]string{contract.LabelTemplateKind: "mykind.webapp.my.domain"}, cr.Labels)
			want := rev
			want.Name, want.Kind = "mykind.webapp.my.domain-"+rev.Hash, "MyKind.webapp.my.domain/v1"
			assert.Equal(t, want, revisions.RevisionOf(cr))
		})
	}
	t.Run("a held count only on a held revision", func(t *testing.T) {
		cr := revisions.ObjectOf("ns", myKind, revisions.Revision{Hash: "ffffffffffff", Phase: revisions.PhaseComplete, HeldDeletes: 3}, nil)
		assert.NotContains(t, cr.Annotations, contract.AnnotationRolloutHeldDeletes)
		assert.Equal(t, revisions.PhasePending, revisions.RevisionOf(revisions.ObjectOf("ns", myKind, revisions.Revision{Hash: "ffffffffffff"}, nil)).Phase, "no phase: Pending")
	})
}
