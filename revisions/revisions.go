package revisions

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates"
)

// Phase is where a revision's rollout stands: the value of its
// contract.AnnotationRolloutPhase.
type Phase string

const (
	// PhasePending: just recorded; the engine has not looked at it yet.
	PhasePending Phase = "Pending"
	// PhaseHeld: it would delete children the previous revision produces;
	// it waits for a confirmation (contract.AnnotationRolloutApproved).
	PhaseHeld Phase = "Held"
	// PhaseProgressing: parents are moving to it, wave by wave.
	PhaseProgressing Phase = "Progressing"
	// PhaseComplete: every parent that is not pinned runs it.
	PhaseComplete Phase = "Complete"
	// PhaseRolledBack: it failed its health gates or was undone; parents
	// returned to the previous complete revision (UndoTarget), and it is
	// not retried.
	PhaseRolledBack Phase = "RolledBack"
	// PhaseSuperseded: a newer revision replaced it before it completed.
	PhaseSuperseded Phase = "Superseded"
)

// Revision is one stored version of a kind's template, as recorded in the
// cluster.
type Revision struct {
	// Name is the ControllerRevision's name.
	Name   string
	Kind   string // "MyKind.webapp.my.domain/v1"
	Number int64
	Hash   string
	Path   string
	// Created is when the revision was recorded.
	Created time.Time
	Phase   Phase
	Wave    int
	Message string
	// HeldDeletes counts the children a held revision would delete; -1
	// when the revision is not held (or was held by an engine that did not
	// record the count).
	HeldDeletes int
	// FailingBefore are the parents ("namespace/name") that were not
	// healthy (ReadyOn) on their previous revision when the rollout moved
	// them to this one: their failures are not this revision's. At most
	// MaxFailingBefore of them are recorded.
	FailingBefore []string
	// SoakSince is when the wave in progress started its soak (every
	// parent of it healthy on the revision); zero when it is not soaking.
	SoakSince time.Time
	// Analysis are the latest results of the wave's analysis checks, one
	// message each.
	Analysis []string
	// Paused, Approved and Undo are the users' requests.
	Paused, Approved, Undo bool
}

// MaxFailingBefore bounds the parents a revision records as failing before
// the move (a ControllerRevision's annotations hold at most 256 KiB).
const MaxFailingBefore = 500

// revisionData is a ControllerRevision's data: the template's files.
type revisionData struct {
	Files map[string]string `json:"files"`
}

// RevisionName names the revision of a kind's template with a given hash:
// the kind's contract.LabelTemplateKind value, then the hash.
func RevisionName(gvk schema.GroupVersionKind, hash string) string {
	return contract.TemplateKindLabel(gvk.GroupKind()) + "-" + hash
}

// RevisionOf reads a stored revision.
func RevisionOf(cr *appsv1.ControllerRevision) Revision {
	a := cr.GetAnnotations()
	wave, _ := strconv.Atoi(a[contract.AnnotationRolloutWave])
	heldDeletes, err := strconv.Atoi(a[contract.AnnotationRolloutHeldDeletes])
	if err != nil {
		heldDeletes = -1
	}
	return Revision{
		Name:          cr.Name,
		Kind:          a[contract.AnnotationTemplateKind],
		Number:        cr.Revision,
		Hash:          a[contract.AnnotationTemplateHash],
		Path:          a[contract.AnnotationTemplatePath],
		Created:       cr.CreationTimestamp.Time,
		Phase:         cmp.Or(Phase(a[contract.AnnotationRolloutPhase]), PhasePending),
		Wave:          wave,
		Message:       a[contract.AnnotationRolloutMessage],
		HeldDeletes:   heldDeletes,
		FailingBefore: splitList(a[contract.AnnotationRolloutFailingBefore]),
		SoakSince:     soakSince(a[contract.AnnotationRolloutSoakSince]),
		Analysis:      splitLines(a[contract.AnnotationRolloutAnalysis]),
		Paused:        a[contract.AnnotationRolloutPaused] == "true",
		Approved:      a[contract.AnnotationRolloutApproved] == "true",
		Undo:          a[contract.AnnotationRolloutUndo] == "true",
	}
}

// ObjectOf is the ControllerRevision that records rev of the kind gvk in
// namespace, holding the template's files: what the Store writes, and what
// RevisionOf reads back as rev (its Name and Kind from gvk and rev.Hash).
// Of the rollout's state, what is zero is left out: a wave of 0, no
// message, no held count (rev.HeldDeletes < 0, or not Held), no requests.
func ObjectOf(namespace string, gvk schema.GroupVersionKind, rev Revision, files map[string]string) *appsv1.ControllerRevision {
	a := map[string]string{
		contract.AnnotationTemplateKind: contract.KindString(gvk),
		contract.AnnotationTemplatePath: rev.Path,
		contract.AnnotationTemplateHash: rev.Hash,
		contract.AnnotationRolloutPhase: string(cmp.Or(rev.Phase, PhasePending)),
	}
	if rev.Wave != 0 {
		a[contract.AnnotationRolloutWave] = strconv.Itoa(rev.Wave)
	}
	if rev.Message != "" {
		a[contract.AnnotationRolloutMessage] = rev.Message
	}
	if rev.Phase == PhaseHeld && rev.HeldDeletes >= 0 {
		a[contract.AnnotationRolloutHeldDeletes] = strconv.Itoa(rev.HeldDeletes)
	}
	if len(rev.FailingBefore) > 0 {
		a[contract.AnnotationRolloutFailingBefore] = strings.Join(rev.FailingBefore, ",")
	}
	if !rev.SoakSince.IsZero() {
		a[contract.AnnotationRolloutSoakSince] = rev.SoakSince.UTC().Format(time.RFC3339Nano)
	}
	if len(rev.Analysis) > 0 {
		a[contract.AnnotationRolloutAnalysis] = strings.Join(rev.Analysis, "\n")
	}
	for key, set := range map[string]bool{contract.AnnotationRolloutPaused: rev.Paused, contract.AnnotationRolloutApproved: rev.Approved, contract.AnnotationRolloutUndo: rev.Undo} {
		if set {
			a[key] = "true"
		}
	}
	// A map of strings: it cannot fail to marshal.
	data, _ := json.Marshal(revisionData{Files: files})
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:              RevisionName(gvk, rev.Hash),
			Namespace:         namespace,
			CreationTimestamp: metav1.NewTime(rev.Created),
			Labels:            map[string]string{contract.LabelTemplateKind: contract.TemplateKindLabel(gvk.GroupKind())},
			Annotations:       a,
		},
		Data:     runtime.RawExtension{Raw: data},
		Revision: rev.Number,
	}
}

// splitList reads a comma-separated annotation; nil when it is empty.
func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// soakSince reads AnnotationRolloutSoakSince; zero when it is absent or
// not a time (the wave's soak starts again).
func soakSince(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// splitLines reads an annotation of lines; nil when it is empty.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// ListRevisions returns the stored revisions of a kind, oldest first.
func ListRevisions(ctx context.Context, c client.Reader, namespace string, gvk schema.GroupVersionKind) ([]Revision, error) {
	crs, err := listObjects(ctx, c, namespace, gvk)
	if err != nil {
		return nil, err
	}
	out := make([]Revision, len(crs))
	for i := range crs {
		out[i] = RevisionOf(&crs[i])
	}
	return out, nil
}

// listObjects returns the ControllerRevisions of a kind, oldest first.
func listObjects(ctx context.Context, c client.Reader, namespace string, gvk schema.GroupVersionKind) ([]appsv1.ControllerRevision, error) {
	list := &appsv1.ControllerRevisionList{}
	if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{contract.LabelTemplateKind: contract.TemplateKindLabel(gvk.GroupKind())}); err != nil {
		return nil, fmt.Errorf("listing the revisions of %s: %w", contract.KindString(gvk), err)
	}
	items := slices.DeleteFunc(list.Items, func(cr appsv1.ControllerRevision) bool {
		return cr.GetAnnotations()[contract.AnnotationTemplateKind] != contract.KindString(gvk)
	})
	slices.SortFunc(items, func(a, b appsv1.ControllerRevision) int { return cmp.Compare(a.Revision, b.Revision) })
	return items, nil
}

// LoadRevision compiles the template a stored revision holds. It fails
// when the revision is a template of another kind than gvk.
func LoadRevision(cr *appsv1.ControllerRevision, gvk schema.GroupVersionKind) (*templates.Template, error) {
	var data revisionData
	if err := json.Unmarshal(cr.Data.Raw, &data); err != nil {
		return nil, fmt.Errorf("revision %d (ControllerRevision %s/%s): reading its files: %w", cr.Revision, cr.Namespace, cr.Name, err)
	}
	t, err := templates.Restore(cr.GetAnnotations()[contract.AnnotationTemplatePath], data.Files)
	if err != nil {
		return nil, fmt.Errorf("revision %d (ControllerRevision %s/%s): %w", cr.Revision, cr.Namespace, cr.Name, err)
	}
	if t.GVK != gvk {
		return nil, fmt.Errorf("revision %d (ControllerRevision %s/%s) is a template of %s, not %s", cr.Revision, cr.Namespace, cr.Name, contract.KindString(t.GVK), contract.KindString(gvk))
	}
	return t, nil
}
