package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/revisions"
)

// Rollouts under sharding: one replica (the sharder) coordinates each
// kind's rollout (rollout.go); the parents it moves are reconciled by
// other replicas, which learn where each parent goes from the cluster: the
// revisions' annotations (follow) and the parent's contract.AnnotationRolloutTo
// (send).

// send moves a parent to the target: a reconcile of it picks the target
// (templateFor). Under sharding another replica reconciles it: the parent
// is annotated with the target, which it reads, and whose event brings the
// reconcile.
func (ro *Rollout) send(ctx context.Context, p *unstructured.Unstructured) error {
	if !ro.kind.Sharded() {
		ro.kind.Enqueue(p)
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{contract.AnnotationRolloutTo: ro.target.Hash}}})
	if err != nil {
		return err
	}
	if err := ro.store.Client.Patch(ctx, p, client.RawPatch(types.MergePatchType, patch)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("moving %s/%s to revision %d: %w", p.GetNamespace(), p.GetName(), ro.target.Number, err)
	}
	return nil
}

// movedTo is the revision hash a rollout coordinator moved a parent to.
func movedTo(p *unstructured.Unstructured) string {
	return p.GetAnnotations()[contract.AnnotationRolloutTo]
}

// errNoRevision: the sharder has not stored a revision of the kind yet.
var errNoRevision = errors.New("no revision of the kind is stored yet")

// follow is what a replica that does not coordinate the rollouts does
// instead (under sharding): it reads the revisions the sharder stored,
// takes the newest as the target and the newest complete as the stable
// one, and requeues its parents when the target or its phase changes (the
// moves of single parents come as annotations, send).
func (ro *Rollout) follow(ctx context.Context) (time.Duration, error) {
	crs, err := ro.store.List(ctx)
	if err != nil {
		return 0, err
	}
	defer ro.publish()
	stored := map[string]bool{}
	var newest *loadedRevision
	for i := range crs {
		rev := revisions.RevisionOf(&crs[i])
		lr := ro.revs[rev.Hash]
		if lr == nil {
			t, err := ro.store.Load(&crs[i])
			if err != nil {
				log.FromContext(ctx).Error(err, "cannot load a stored revision; its parents move to the stable revision", "kind", contract.KindString(ro.gvk))
				continue
			}
			lr = &loadedRevision{tpl: t}
			ro.revs[rev.Hash] = lr
		}
		lr.Revision = rev
		stored[rev.Hash] = true
		if newest == nil || rev.Number > newest.Number {
			newest = lr
		}
	}
	if newest == nil {
		return 0, errNoRevision
	}
	for hash := range ro.revs {
		if !stored[hash] {
			delete(ro.revs, hash) // pruned
		}
	}
	changed := ro.target != nil && (ro.target != newest || ro.followed != newest.Phase)
	ro.target, ro.followed = newest, newest.Phase
	clear(ro.moving)
	ro.restable()
	if changed {
		log.FromContext(ctx).Info("template revision", "kind", contract.KindString(ro.gvk), "revision", newest.Number, "hash", newest.Hash, "phase", newest.Phase)
		ro.publish()
		ro.requeueAll(ctx)
	}
	return rolloutTickActive, nil
}
