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

// TestFailingBefore: a parent not healthy on the revision it runs when
// it moves was failing before; one that runs none yet was not.
func TestFailingBefore(t *testing.T) {
	stale := rolloutParent("stale", "h1", metav1.ConditionTrue, metav1.ConditionTrue)
	stale.SetGeneration(2)
	for _, tt := range []struct {
		name   string
		parent *unstructured.Unstructured
		want   bool
	}{
		{"healthy", rolloutParent("ok", "h1", metav1.ConditionTrue, metav1.ConditionTrue), false},
		{"not Ready", rolloutParent("down", "h1", metav1.ConditionTrue, metav1.ConditionFalse), true},
		{"not Synced", rolloutParent("refused", "h1", metav1.ConditionFalse, metav1.ConditionTrue), true},
		{"status of an older generation", stale, true},
		{"never reconciled", rolloutParent("new", "", metav1.ConditionUnknown, metav1.ConditionUnknown), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, failingBefore(tt.parent))
		})
	}
}

// TestJudge: the gates count regressions only. A parent failing before
// its move neither fails the revision nor holds the next wave; one that
// was healthy and fails after does, and one not yet healthy holds the wave.
func TestJudge(t *testing.T) {
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	past := since.Add(time.Minute)
	const deadline = 30 * time.Second
	brokenBefore := rolloutParent("broken-before", "h2", metav1.ConditionTrue, metav1.ConditionFalse)
	regressed := rolloutParent("regressed", "h2", metav1.ConditionTrue, metav1.ConditionFalse)
	refusedBefore := rolloutParent("refused-before", "h2", metav1.ConditionFalse, metav1.ConditionFalse)
	healthy := rolloutParent("healthy", "h2", metav1.ConditionTrue, metav1.ConditionTrue)
	moves := map[types.UID]move{
		brokenBefore.GetUID():  {since: since, failingBefore: true},
		refusedBefore.GetUID(): {since: since, failingBefore: true},
		regressed.GetUID():     {since: since},
		healthy.GetUID():       {since: since},
	}
	for _, tt := range []struct {
		name  string
		moved []*unstructured.Unstructured
		at    time.Time
		want  verdict
	}{
		{"only parents failing before: the wave goes on", []*unstructured.Unstructured{brokenBefore, refusedBefore, healthy}, past,
			verdict{failingBefore: []string{"ns/broken-before", "ns/refused-before"}}},
		{"a regression fails", []*unstructured.Unstructured{brokenBefore, regressed, healthy}, past,
			verdict{failures: []string{"ns/regressed: not Ready 30s after its update (progressDeadline): Ready=False R: ready message"}, failingBefore: []string{"ns/broken-before"}, waiting: 1}},
		{"within the deadline a regression waits", []*unstructured.Unstructured{regressed}, since.Add(time.Second),
			verdict{waiting: 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, judge(tt.moved, moves, "h2", tt.at, deadline))
		})
	}
}

// TestRecordFailingBefore: the recorded list grows, sorted, without
// repeats, bounded, and says when it changed.
func TestRecordFailingBefore(t *testing.T) {
	rev := &revisions.Revision{}
	assert.False(t, recordFailingBefore(rev, nil))
	assert.True(t, recordFailingBefore(rev, []string{"ns/b", "ns/a"}))
	assert.Equal(t, []string{"ns/a", "ns/b"}, rev.FailingBefore)
	assert.False(t, recordFailingBefore(rev, []string{"ns/a"}))
	many := make([]string, 0, revisions.MaxFailingBefore+10)
	for i := range revisions.MaxFailingBefore + 10 {
		many = append(many, "ns/p"+string(rune('a'+i%26))+time.Duration(i).String())
	}
	assert.True(t, recordFailingBefore(rev, many))
	assert.Len(t, rev.FailingBefore, revisions.MaxFailingBefore)
}

// TestCanaryByPolicy: a parent's own canary label does not put it first
// unless the policy lets it; the policy's namespaces do.
func TestCanaryByPolicy(t *testing.T) {
	var parents []unstructured.Unstructured
	for _, name := range []string{"a", "b", "c", "d", "e", "f"} {
		parents = append(parents, *rolloutParent(name, "h1", metav1.ConditionTrue, metav1.ConditionTrue))
	}
	plain := rolloutOrder(parents, policy.Canary{})
	// The one the UID order puts last labels itself a canary.
	last := plain[len(plain)-1].GetName()
	for i := range parents {
		if parents[i].GetName() == last {
			parents[i].SetLabels(map[string]string{contract.LabelCanary: "true"})
		}
	}
	assert.Equal(t, last, rolloutOrder(parents, policy.Canary{})[len(parents)-1].GetName(), "the object's label does not count by default")
	assert.Equal(t, last, rolloutOrder(parents, policy.Canary{ObjectLabel: true})[0].GetName(), "it counts where the policy allows it")

	// The policy's canary namespace goes first, labelled or not.
	second := plain[len(plain)-2].GetName()
	for i := range parents {
		if parents[i].GetName() == second {
			parents[i].SetNamespace("canary")
		}
	}
	order := rolloutOrder(parents, policy.Canary{Namespaces: []string{"canary"}})
	assert.Equal(t, second, order[0].GetName())
	assert.Equal(t, last, order[len(order)-1].GetName())
}

// TestPruneKeepsFollowedPinsOnly: beyond the history limit, a revision
// is kept for a pin only while the engine follows the pin: not for one
// older than rollout.pins allows, nor for one to a rolled-back revision;
// and the revision a refused pin's object last ran is not kept for it.
func TestPruneKeepsFollowedPinsOnly(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, appsv1.AddToScheme(scheme))
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	gvk := schema.GroupVersionKind{Group: "test.cuengine.dev", Version: "v1", Kind: "Test"}
	k := &fakeKind{}
	ro := New(k, gvk, &revisions.Store{Client: c, Reader: c, Namespace: "default", GVK: gvk}, 1, Hold{})
	k.ro = ro
	phases := []revisions.Phase{revisions.PhaseComplete, revisions.PhaseComplete, revisions.PhaseRolledBack, revisions.PhaseComplete, revisions.PhaseComplete, revisions.PhaseComplete}
	for i, phase := range phases {
		n := int64(i + 1)
		hash := fmt.Sprintf("h%d", n)
		rev := revisions.Revision{Name: revisions.RevisionName(gvk, hash), Number: n, Hash: hash, Phase: phase, HeldDeletes: -1}
		require.NoError(t, c.Create(context.Background(), revisions.ObjectOf("default", gvk, rev, nil)))
		lr := &loadedRevision{Revision: rev, tpl: &templates.Template{Path: hash, Rollout: policy.Rollout{Pins: policy.Pins{Newest: 4}}}}
		ro.revs[hash] = lr
		ro.target = lr
	}
	ro.restable()
	pinned := func(name, pin, runs string) unstructured.Unstructured {
		p := rolloutParent(name, runs, metav1.ConditionTrue, metav1.ConditionTrue)
		p.SetAnnotations(map[string]string{contract.AnnotationTemplateRevision: pin})
		return *p
	}
	k.parents = []unstructured.Unstructured{
		pinned("too-old", "1", "h1"),                                             // revisions 3 to 6 may be pinned: refused
		pinned("rolled-back", "3", "h2"),                                         // refused; h2 is what it last ran
		pinned("followed", "4", "h4"),                                            // kept
		*rolloutParent("on-5", "h5", metav1.ConditionTrue, metav1.ConditionTrue), // runs it: kept
	}
	ro.prune(context.Background())
	left, err := revisions.ListRevisions(context.Background(), c, "default", gvk)
	require.NoError(t, err)
	var numbers []int64
	for _, r := range left {
		numbers = append(numbers, r.Number)
	}
	assert.Equal(t, []int64{4, 5, 6}, numbers)
}
