package reconciler

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/render"
)

// record is the one write to the parent's metadata, and the one write in
// the middle of a reconcile: the finalizer, the record of every external
// resource (its physical name, settings and deletion policy) before that
// resource is first created, and the inventory of the children that cannot
// carry an owner reference, before they are created (with, for those in
// workload clusters, the proof of each: render.Proofs). This order is what
// makes a crash harmless: a resource or such a child is created only once
// the parent already names it, so whatever dies between the two, the next
// reconcile finds the name and adopts or deletes the object instead of
// leaking it.
//
// The write is optimistic-locked, so a concurrent change fails it instead
// of being overwritten. When it writes, the reconcile ends: the parent
// changed under it, and the watch event of this write starts the next one.
func (r *Reconciler) record(ctx context.Context, parent *unstructured.Unstructured, plan *resourcePlan, inv render.Inventory, proofs render.Proofs, st *status) (bool, error) {
	// A parent with the finalizer always carries an inventory, so that
	// ownership of its children is never decided by labels (render.IsOurs).
	finalizer := plan.finalizer || len(inv) > 0 || controllerutil.ContainsFinalizer(parent, contract.Finalizer)
	addFinalizer := finalizer && !controllerutil.ContainsFinalizer(parent, contract.Finalizer)
	annotations := maps.Clone(parent.GetAnnotations())
	if annotations == nil {
		annotations = map[string]string{}
	}
	if plan.changed {
		maps.DeleteFunc(annotations, func(k, _ string) bool { return isRecordAnnotation(k) })
		for name, rec := range plan.records {
			b, _ := json.Marshal(rec)
			annotations[contract.AnnotationResourcePrefix+name] = string(b)
		}
	}
	if finalizer {
		annotations[contract.AnnotationInventory] = inv.Encode()
		if len(proofs) > 0 {
			annotations[contract.AnnotationInventoryProofs] = proofs.Encode()
		} else {
			delete(annotations, contract.AnnotationInventoryProofs)
		}
	}
	setAnnotations := !maps.Equal(annotations, parent.GetAnnotations())
	if !addFinalizer && !setAnnotations {
		return false, nil // most reconciles: nothing to record, nothing copied
	}
	updated := parent.DeepCopy()
	if addFinalizer {
		controllerutil.AddFinalizer(updated, contract.Finalizer)
	}
	if setAnnotations {
		updated.SetAnnotations(annotations)
	}
	st.skip = true
	patch := client.MergeFromWithOptions(parent, client.MergeFromWithOptimisticLock{})
	if err := r.writer.Patch(ctx, updated, patch); err != nil {
		return true, fmt.Errorf("recording resources on the parent: %w", err)
	}
	return true, nil
}

func isRecordAnnotation(key string) bool {
	return strings.HasPrefix(key, contract.AnnotationResourcePrefix)
}
