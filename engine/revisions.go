package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates"
)

// Every accepted version of a kind's template is a revision: an apps/v1
// ControllerRevision in the engine's namespace, named after the kind and
// the template's content hash, numbered in sequence per kind, holding the
// template's files. The rollout of a revision (rollout.go) is recorded in
// the revision's annotations (contract.AnnotationRollout*), so every
// replica and a restarted engine agree on it, and kubectl can read and
// change it (package contract has the keys).

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
	// returned to the previous complete revision, and it is not retried.
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
	// Paused, Approved and Undo are the users' requests.
	Paused, Approved, Undo bool
}

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
		Name:        cr.Name,
		Kind:        a[contract.AnnotationTemplateKind],
		Number:      cr.Revision,
		Hash:        a[contract.AnnotationTemplateHash],
		Path:        a[contract.AnnotationTemplatePath],
		Created:     cr.CreationTimestamp.Time,
		Phase:       cmp.Or(Phase(a[contract.AnnotationRolloutPhase]), PhasePending),
		Wave:        wave,
		Message:     a[contract.AnnotationRolloutMessage],
		HeldDeletes: heldDeletes,
		Paused:      a[contract.AnnotationRolloutPaused] == "true",
		Approved:    a[contract.AnnotationRolloutApproved] == "true",
		Undo:        a[contract.AnnotationRolloutUndo] == "true",
	}
}

// ListRevisions returns the stored revisions of a kind, oldest first.
func ListRevisions(ctx context.Context, c client.Reader, namespace string, gvk schema.GroupVersionKind) ([]Revision, error) {
	crs, err := listRevisionObjects(ctx, c, namespace, gvk)
	if err != nil {
		return nil, err
	}
	out := make([]Revision, len(crs))
	for i := range crs {
		out[i] = RevisionOf(&crs[i])
	}
	return out, nil
}

func listRevisionObjects(ctx context.Context, c client.Reader, namespace string, gvk schema.GroupVersionKind) ([]appsv1.ControllerRevision, error) {
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

// revisionStore reads and writes a kind's revisions.
type revisionStore struct {
	c         client.Client
	reader    client.Reader // the apiserver, not a cache
	namespace string
	gvk       schema.GroupVersionKind
}

// ensure returns the revision of t, recording it with the next number when
// it is new. first is true when the kind had no revision at all.
func (s *revisionStore) ensure(ctx context.Context, t *templates.Template) (rev Revision, first bool, err error) {
	existing, err := listRevisionObjects(ctx, s.reader, s.namespace, s.gvk)
	if err != nil {
		return Revision{}, false, err
	}
	for i := range existing {
		if RevisionOf(&existing[i]).Hash != t.Hash {
			continue
		}
		if i == len(existing)-1 {
			return RevisionOf(&existing[i]), false, nil // the newest, as it stands
		}
		// The files went back to an older revision's content: that is a
		// new rollout of it, numbered next, as a StatefulSet's revisions
		// are, so the newest revision is always the one rolling out.
		rev, err := s.renumber(ctx, &existing[i], existing[len(existing)-1].Revision+1)
		return rev, false, err
	}
	var number int64 = 1
	if n := len(existing); n > 0 {
		number = existing[n-1].Revision + 1
	}
	data, err := json.Marshal(revisionData{Files: t.Files()})
	if err != nil {
		return Revision{}, false, err
	}
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:      RevisionName(s.gvk, t.Hash),
			Namespace: s.namespace,
			Labels:    map[string]string{contract.LabelTemplateKind: contract.TemplateKindLabel(s.gvk.GroupKind())},
			Annotations: map[string]string{
				contract.AnnotationTemplateKind: contract.KindString(s.gvk),
				contract.AnnotationTemplatePath: t.Path,
				contract.AnnotationTemplateHash: t.Hash,
				contract.AnnotationRolloutPhase: string(PhasePending),
			},
		},
		Data:     runtime.RawExtension{Raw: data},
		Revision: number,
	}
	if err := s.c.Create(ctx, cr); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Recorded by another replica meanwhile (or listed before it
			// was visible): read it.
			if err := s.reader.Get(ctx, client.ObjectKeyFromObject(cr), cr); err != nil {
				return Revision{}, false, err
			}
			return RevisionOf(cr), false, nil
		}
		return Revision{}, false, fmt.Errorf("recording revision %d of %s: %w", number, contract.KindString(s.gvk), err)
	}
	return RevisionOf(cr), len(existing) == 0, nil
}

// renumber makes a stored revision the newest, pending a new rollout, with
// the users' requests of its previous rollout cleared.
func (s *revisionStore) renumber(ctx context.Context, cr *appsv1.ControllerRevision, number int64) (Revision, error) {
	patch, err := json.Marshal(map[string]any{
		"revision": number,
		"metadata": map[string]any{"annotations": map[string]any{
			contract.AnnotationRolloutPhase:    string(PhasePending),
			contract.AnnotationRolloutWave:     "0",
			contract.AnnotationRolloutMessage:  fmt.Sprintf("the files are revision %d's content again", cr.Revision),
			contract.AnnotationRolloutPaused:   nil,
			contract.AnnotationRolloutApproved: nil,
			contract.AnnotationRolloutUndo:     nil,
		}},
	})
	if err != nil {
		return Revision{}, err
	}
	if err := s.c.Patch(ctx, cr, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		return Revision{}, fmt.Errorf("renumbering revision %d of %s as %d: %w", cr.Revision, contract.KindString(s.gvk), number, err)
	}
	return RevisionOf(cr), nil
}

// load compiles a stored revision's template.
func (s *revisionStore) load(cr *appsv1.ControllerRevision) (*templates.Template, error) {
	return LoadRevision(cr, s.gvk)
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

// record writes a revision's rollout state (phase, wave, message) into its
// annotations, unless they already say so. Users' requests that were acted
// upon are cleared with it.
func (s *revisionStore) record(ctx context.Context, rev Revision, clear ...string) error {
	patch := map[string]any{
		contract.AnnotationRolloutPhase:       string(rev.Phase),
		contract.AnnotationRolloutWave:        strconv.Itoa(rev.Wave),
		contract.AnnotationRolloutMessage:     rev.Message,
		contract.AnnotationRolloutHeldDeletes: nil,
	}
	if rev.Phase == PhaseHeld && rev.HeldDeletes >= 0 {
		patch[contract.AnnotationRolloutHeldDeletes] = strconv.Itoa(rev.HeldDeletes)
	}
	for _, a := range clear {
		patch[a] = nil
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": patch}})
	if err != nil {
		return err
	}
	cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: rev.Name, Namespace: s.namespace}}
	if err := s.c.Patch(ctx, cr, client.RawPatch("application/merge-patch+json", body)); err != nil {
		return fmt.Errorf("recording the rollout of revision %d of %s: %w", rev.Number, contract.KindString(s.gvk), err)
	}
	return nil
}

// prune deletes the oldest revisions beyond limit, keeping those in use.
func (s *revisionStore) prune(ctx context.Context, limit int, inUse func(Revision) bool) error {
	crs, err := listRevisionObjects(ctx, s.reader, s.namespace, s.gvk)
	if err != nil {
		return err
	}
	excess := len(crs) - limit
	for i := 0; i < len(crs) && excess > 0; i++ {
		if inUse(RevisionOf(&crs[i])) {
			continue
		}
		if err := s.c.Delete(ctx, &crs[i]); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting old revision %s: %w", crs[i].Name, err)
		}
		excess--
	}
	return nil
}
