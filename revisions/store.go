package revisions

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates"
)

// Store reads and writes a kind's revisions: the rollout coordinator's
// record of them (package engine).
type Store struct {
	Client client.Client
	// Reader reads the revisions: the apiserver, not a cache, so that
	// replicas and a restarted engine agree on the numbers.
	Reader    client.Reader
	Namespace string
	GVK       schema.GroupVersionKind
}

// List returns the kind's ControllerRevisions, oldest first.
func (s *Store) List(ctx context.Context) ([]appsv1.ControllerRevision, error) {
	return listObjects(ctx, s.Reader, s.Namespace, s.GVK)
}

// Ensure returns the revision of t, recording it with the next number when
// it is new. first is true when the kind had no revision at all: that one
// is recorded complete at once, since nothing ran before it.
func (s *Store) Ensure(ctx context.Context, t *templates.Template) (rev Revision, first bool, err error) {
	existing, err := s.List(ctx)
	if err != nil {
		return Revision{}, false, err
	}
	return s.ensureAmong(ctx, t, existing)
}

// EnsureAmong is Ensure with the kind's revisions as the caller just
// listed them (List), which saves a request at start-up; stored is how
// many revisions the kind has afterwards.
func (s *Store) EnsureAmong(ctx context.Context, t *templates.Template, existing []appsv1.ControllerRevision) (rev Revision, stored int, err error) {
	if rev, _, err = s.ensureAmong(ctx, t, existing); err != nil {
		return Revision{}, 0, err
	}
	stored = len(existing)
	if !slices.ContainsFunc(existing, func(cr appsv1.ControllerRevision) bool { return cr.Name == rev.Name }) {
		stored++
	}
	return rev, stored, nil
}

func (s *Store) ensureAmong(ctx context.Context, t *templates.Template, existing []appsv1.ControllerRevision) (rev Revision, first bool, err error) {
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
	if err := t.StoreError(); err != nil {
		// etcd would refuse it ("request is too large"), on every retry.
		return Revision{}, false, fmt.Errorf("recording revision %d of %s: %w", number, contract.KindString(s.GVK), err)
	}
	rev = Revision{Number: number, Hash: t.Hash, Path: t.Path, Phase: PhasePending}
	if len(existing) == 0 {
		// Nothing ran before it: it is complete at once.
		rev.Phase, rev.Message, rev.Wave = PhaseComplete, "the first revision of the kind", len(t.Rollout.Waves)-1
	}
	cr := ObjectOf(s.Namespace, s.GVK, rev, t.Files())
	if err := s.Client.Create(ctx, cr); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Recorded by another replica meanwhile (or listed before it
			// was visible): read it.
			if err := s.Reader.Get(ctx, client.ObjectKeyFromObject(cr), cr); err != nil {
				return Revision{}, false, err
			}
			return RevisionOf(cr), false, nil
		}
		return Revision{}, false, fmt.Errorf("recording revision %d of %s: %w", number, contract.KindString(s.GVK), err)
	}
	return RevisionOf(cr), len(existing) == 0, nil
}

// renumber makes a stored revision the newest, pending a new rollout, with
// the users' requests of its previous rollout cleared.
func (s *Store) renumber(ctx context.Context, cr *appsv1.ControllerRevision, number int64) (Revision, error) {
	patch, err := json.Marshal(map[string]any{
		"revision": number,
		"metadata": map[string]any{"annotations": map[string]any{
			contract.AnnotationRolloutPhase:    string(PhasePending),
			contract.AnnotationRolloutWave:     "0",
			contract.AnnotationRolloutMessage:  fmt.Sprintf("the files are revision %d's content again", cr.Revision),
			contract.AnnotationRolloutPaused:   nil,
			contract.AnnotationRolloutApproved: nil,
			contract.AnnotationRolloutUndo:     nil,
			// Its soak and analysis were its previous rollout's.
			contract.AnnotationRolloutSoakSince: nil,
			contract.AnnotationRolloutAnalysis:  nil,
		}},
	})
	if err != nil {
		return Revision{}, err
	}
	if err := s.Client.Patch(ctx, cr, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		return Revision{}, fmt.Errorf("renumbering revision %d of %s as %d: %w", cr.Revision, contract.KindString(s.GVK), number, err)
	}
	return RevisionOf(cr), nil
}

// Load compiles a stored revision's template.
func (s *Store) Load(cr *appsv1.ControllerRevision) (*templates.Template, error) {
	return LoadRevision(cr, s.GVK)
}

// Record writes a revision's rollout state (phase, wave, message) into its
// annotations, unless they already say so. Users' requests that were acted
// upon are cleared with it.
func (s *Store) Record(ctx context.Context, rev Revision, clear ...string) error {
	patch := map[string]any{
		contract.AnnotationRolloutPhase:         string(rev.Phase),
		contract.AnnotationRolloutWave:          strconv.Itoa(rev.Wave),
		contract.AnnotationRolloutMessage:       rev.Message,
		contract.AnnotationRolloutHeldDeletes:   nil,
		contract.AnnotationRolloutFailingBefore: nil,
		contract.AnnotationRolloutSoakSince:     nil,
		contract.AnnotationRolloutAnalysis:      nil,
	}
	if !rev.SoakSince.IsZero() {
		patch[contract.AnnotationRolloutSoakSince] = rev.SoakSince.UTC().Format(time.RFC3339Nano)
	}
	if len(rev.Analysis) > 0 {
		patch[contract.AnnotationRolloutAnalysis] = strings.Join(rev.Analysis, "\n")
	}
	if len(rev.FailingBefore) > 0 {
		patch[contract.AnnotationRolloutFailingBefore] = strings.Join(rev.FailingBefore, ",")
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
	cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: rev.Name, Namespace: s.Namespace}}
	if err := s.Client.Patch(ctx, cr, client.RawPatch("application/merge-patch+json", body)); err != nil {
		return fmt.Errorf("recording the rollout of revision %d of %s: %w", rev.Number, contract.KindString(s.GVK), err)
	}
	return nil
}

// Prune deletes the oldest revisions beyond limit, keeping those in use.
func (s *Store) Prune(ctx context.Context, limit int, inUse func(Revision) bool) error {
	crs, err := s.List(ctx)
	if err != nil {
		return err
	}
	excess := len(crs) - limit
	for i := 0; i < len(crs) && excess > 0; i++ {
		if inUse(RevisionOf(&crs[i])) {
			continue
		}
		if err := s.Client.Delete(ctx, &crs[i]); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting old revision %s: %w", crs[i].Name, err)
		}
		excess--
	}
	return nil
}
