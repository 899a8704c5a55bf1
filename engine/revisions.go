package engine

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/templates"
)

// Every accepted version of a kind's template is a revision: an apps/v1
// ControllerRevision in the engine's namespace, named after the kind and
// the template's content hash, numbered in sequence per kind, holding the
// template's files. The rollout of a revision (rollout.go) is recorded in
// the revision's annotations, so every replica and a restarted engine
// agree on it, and kubectl can read and change it:
//
//	kubectl get controllerrevisions -l engine.cuengine.dev/template-kind=mykind.webapp.my.domain
//	kubectl annotate controllerrevision NAME engine.cuengine.dev/rollout-paused=true
const (
	// LabelTemplateKind selects a kind's revisions: "mykind.webapp.my.domain".
	LabelTemplateKind = "engine.cuengine.dev/template-kind"
	// AnnotationTemplateKind is the revision's kind in full: "MyKind.webapp.my.domain/v1".
	AnnotationTemplateKind = "engine.cuengine.dev/template-kind"
	// AnnotationTemplatePath is the template's path in the templates directory.
	AnnotationTemplatePath = "engine.cuengine.dev/template-path"
	// AnnotationTemplateHash is the template's content hash.
	AnnotationTemplateHash = "engine.cuengine.dev/template-hash"

	// AnnotationRolloutPhase is where the revision's rollout stands (Phase).
	AnnotationRolloutPhase = "engine.cuengine.dev/rollout-phase"
	// AnnotationRolloutWave is the index of the wave in progress.
	AnnotationRolloutWave = "engine.cuengine.dev/rollout-wave"
	// AnnotationRolloutMessage says why the rollout is where it is.
	AnnotationRolloutMessage = "engine.cuengine.dev/rollout-message"
	// AnnotationRolloutHeldDeletes counts the children a held revision
	// would delete; absent unless the revision is held.
	AnnotationRolloutHeldDeletes = "engine.cuengine.dev/rollout-held-deletes"

	// AnnotationRolloutPaused, "true", set by a user, stops a rollout
	// between waves; removing it resumes.
	AnnotationRolloutPaused = "engine.cuengine.dev/rollout-paused"
	// AnnotationRolloutApproved, "true", set by a user, lets a held
	// revision (one that deletes children) roll out.
	AnnotationRolloutApproved = "engine.cuengine.dev/rollout-approved"
	// AnnotationRolloutUndo, "true", set by a user, rolls the revision
	// back: every parent returns to the previous complete revision.
	AnnotationRolloutUndo = "engine.cuengine.dev/rollout-undo"

	// AnnotationTemplateRevision on a parent pins it to a revision number,
	// whatever the files say; removing it lets the parent follow.
	AnnotationTemplateRevision = "engine.cuengine.dev/template-revision"
)

// Phase is where a revision's rollout stands.
type Phase string

const (
	// PhasePending: just recorded; the engine has not looked at it yet.
	PhasePending Phase = "Pending"
	// PhaseHeld: it would delete children the previous revision produces;
	// it waits for a confirmation (AnnotationRolloutApproved).
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

// RevisionName names the revision of a kind's template with a given hash.
func RevisionName(gvk schema.GroupVersionKind, hash string) string {
	return kindLabel(gvk) + "-" + hash
}

// kindLabel is the value of LabelTemplateKind for a kind: "mykind.webapp.my.domain",
// or a digest of it when it is longer than a label value may be.
func kindLabel(gvk schema.GroupVersionKind) string {
	v := strings.ToLower(gvk.Kind + "." + gvk.Group)
	if len(v) > 63 {
		sum := sha256.Sum256([]byte(v))
		v = strings.TrimRight(v[:50], ".-") + "-" + hex.EncodeToString(sum[:])[:12]
	}
	return v
}

// RevisionOf reads a stored revision.
func RevisionOf(cr *appsv1.ControllerRevision) Revision {
	a := cr.GetAnnotations()
	wave, _ := strconv.Atoi(a[AnnotationRolloutWave])
	heldDeletes, err := strconv.Atoi(a[AnnotationRolloutHeldDeletes])
	if err != nil {
		heldDeletes = -1
	}
	return Revision{
		Name:        cr.Name,
		Kind:        a[AnnotationTemplateKind],
		Number:      cr.Revision,
		Hash:        a[AnnotationTemplateHash],
		Path:        a[AnnotationTemplatePath],
		Created:     cr.CreationTimestamp.Time,
		Phase:       cmp.Or(Phase(a[AnnotationRolloutPhase]), PhasePending),
		Wave:        wave,
		Message:     a[AnnotationRolloutMessage],
		HeldDeletes: heldDeletes,
		Paused:      a[AnnotationRolloutPaused] == "true",
		Approved:    a[AnnotationRolloutApproved] == "true",
		Undo:        a[AnnotationRolloutUndo] == "true",
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
	if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{LabelTemplateKind: kindLabel(gvk)}); err != nil {
		return nil, fmt.Errorf("listing the revisions of %s: %w", kindString(gvk), err)
	}
	items := slices.DeleteFunc(list.Items, func(cr appsv1.ControllerRevision) bool {
		return cr.GetAnnotations()[AnnotationTemplateKind] != kindString(gvk)
	})
	slices.SortFunc(items, func(a, b appsv1.ControllerRevision) int { return cmp.Compare(a.Revision, b.Revision) })
	return items, nil
}

// ParentRevision returns the revision a parent's status says it runs:
// status.templateRevision, written by the engine with each status.
func ParentRevision(parent *unstructured.Unstructured) (number int64, hash string) {
	number, _, _ = unstructured.NestedInt64(parent.Object, "status", "templateRevision", "number")
	hash, _, _ = unstructured.NestedString(parent.Object, "status", "templateRevision", "hash")
	return number, hash
}

// PinnedRevision returns the revision number a parent is pinned to, 0 when
// it is not pinned, and an error when the annotation is not a number.
func PinnedRevision(parent *unstructured.Unstructured) (int64, error) {
	v, ok := parent.GetAnnotations()[AnnotationTemplateRevision]
	if !ok {
		return 0, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("annotation %s=%q is not a revision number", AnnotationTemplateRevision, v)
	}
	return n, nil
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
			Labels:    map[string]string{LabelTemplateKind: kindLabel(s.gvk)},
			Annotations: map[string]string{
				AnnotationTemplateKind: kindString(s.gvk),
				AnnotationTemplatePath: t.Path,
				AnnotationTemplateHash: t.Hash,
				AnnotationRolloutPhase: string(PhasePending),
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
		return Revision{}, false, fmt.Errorf("recording revision %d of %s: %w", number, kindString(s.gvk), err)
	}
	return RevisionOf(cr), len(existing) == 0, nil
}

// renumber makes a stored revision the newest, pending a new rollout, with
// the users' requests of its previous rollout cleared.
func (s *revisionStore) renumber(ctx context.Context, cr *appsv1.ControllerRevision, number int64) (Revision, error) {
	patch, err := json.Marshal(map[string]any{
		"revision": number,
		"metadata": map[string]any{"annotations": map[string]any{
			AnnotationRolloutPhase:    string(PhasePending),
			AnnotationRolloutWave:     "0",
			AnnotationRolloutMessage:  fmt.Sprintf("the files are revision %d's content again", cr.Revision),
			AnnotationRolloutPaused:   nil,
			AnnotationRolloutApproved: nil,
			AnnotationRolloutUndo:     nil,
		}},
	})
	if err != nil {
		return Revision{}, err
	}
	if err := s.c.Patch(ctx, cr, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		return Revision{}, fmt.Errorf("renumbering revision %d of %s as %d: %w", cr.Revision, kindString(s.gvk), number, err)
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
	t, err := templates.Restore(cr.GetAnnotations()[AnnotationTemplatePath], data.Files)
	if err != nil {
		return nil, fmt.Errorf("revision %d (ControllerRevision %s/%s): %w", cr.Revision, cr.Namespace, cr.Name, err)
	}
	if t.GVK != gvk {
		return nil, fmt.Errorf("revision %d (ControllerRevision %s/%s) is a template of %s, not %s", cr.Revision, cr.Namespace, cr.Name, kindString(t.GVK), kindString(gvk))
	}
	return t, nil
}

// record writes a revision's rollout state (phase, wave, message) into its
// annotations, unless they already say so. Users' requests that were acted
// upon are cleared with it.
func (s *revisionStore) record(ctx context.Context, rev Revision, clear ...string) error {
	patch := map[string]any{
		AnnotationRolloutPhase:       string(rev.Phase),
		AnnotationRolloutWave:        strconv.Itoa(rev.Wave),
		AnnotationRolloutMessage:     rev.Message,
		AnnotationRolloutHeldDeletes: nil,
	}
	if rev.Phase == PhaseHeld && rev.HeldDeletes >= 0 {
		patch[AnnotationRolloutHeldDeletes] = strconv.Itoa(rev.HeldDeletes)
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
		return fmt.Errorf("recording the rollout of revision %d of %s: %w", rev.Number, kindString(s.gvk), err)
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
