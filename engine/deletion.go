package engine

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cuengine/engine/providers"
	"github.com/cuengine/engine/templates"
)

const (
	// Finalizer keeps a parent until the engine has deleted what the
	// garbage collector cannot: external resources, and children outside
	// the parent's namespace.
	Finalizer = "engine.cuengine.dev/finalizer"
	// AnnotationDeletionPolicy on a parent overrides the template's
	// deletionPolicy for all its resources; "Orphan" keeps them.
	AnnotationDeletionPolicy = "engine.cuengine.dev/deletion-policy"
)

// finalize runs when the parent is being deleted: it deletes external
// resources per their recorded deletion policy and children without an
// owner reference, then drops the finalizer. It needs only what is recorded
// on the parent, never the template, so a template that no longer compiles
// cannot block deletion.
func (r *reconciler) finalize(ctx context.Context, t *templates.Template, parent *unstructured.Unstructured) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(parent, Finalizer) {
		return ctrl.Result{}, nil
	}
	logger := log.FromContext(ctx)
	st := newStatusUpdate(parent)
	records, err := recordedResources(parent)
	if err != nil {
		return ctrl.Result{}, err
	}
	orphanAll := parent.GetAnnotations()[AnnotationDeletionPolicy] == templates.DeletionPolicyOrphan
	specs := lastSpecs(t, parent)
	for _, rec := range records {
		if orphanAll || rec.DeletionPolicy == templates.DeletionPolicyOrphan {
			logger.Info("orphaning external resource", "resource", rec.Name, "externalName", rec.ExternalName)
			continue
		}
		p, ok := r.e.opts.Providers.Get(rec.Provider)
		if !ok {
			st.syncFailed(ReasonUnknownProvider, fmt.Sprintf("resource %s: provider %q is not available in this engine; to delete the parent anyway, annotate it %s=Orphan", rec.Name, rec.Provider, AnnotationDeletionPolicy))
			return r.writeStatus(ctx, parent, st, ctrl.Result{}, nil)
		}
		req := providers.Request{Name: rec.Name, ExternalName: rec.ExternalName, Owner: ownerOf(parent), Spec: specs[rec.Name], Settings: rec.Settings}
		callCtx, cancel := context.WithTimeout(ctx, providerCallTimeout)
		err := p.Delete(callCtx, req)
		cancel()
		if err != nil {
			reason, retryable := providers.Classify(err)
			st.syncFailed(reason, fmt.Sprintf("deleting resource %s (%s): %v; the finalizer is kept. To delete the parent and keep the resource, annotate it %s=Orphan", rec.Name, rec.ExternalName, err, AnnotationDeletionPolicy))
			res := ctrl.Result{RequeueAfter: r.e.opts.ResourceResync}
			if retryable {
				res = ctrl.Result{Requeue: true}
			}
			return r.writeStatus(ctx, parent, st, res, nil)
		}
		r.normal(parent, "Deleted", "Delete", "Deleted %s resource %s", rec.Provider, rec.ExternalName)
	}
	if err := r.deleteUnownedChildren(ctx, parent); err != nil {
		return ctrl.Result{}, err
	}
	patch := client.MergeFromWithOptions(parent.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(parent, Finalizer)
	if err := r.e.writer.Patch(ctx, parent, patch); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return ctrl.Result{Requeue: true}, nil
		}
		return ctrl.Result{}, fmt.Errorf("removing finalizer: %w", err)
	}
	return ctrl.Result{}, nil
}

// deleteUnownedChildren deletes the children the garbage collector will not:
// those in other namespaces or cluster-scoped, which carry no owner reference.
func (r *reconciler) deleteUnownedChildren(ctx context.Context, parent *unstructured.Unstructured) error {
	existing, err := r.observe(ctx, parent)
	if err != nil {
		return err
	}
	for _, c := range existing {
		if metav1.GetControllerOfNoCopy(c) != nil {
			continue
		}
		uid := c.GetUID()
		if err := r.e.writer.Delete(ctx, c, client.Preconditions(metav1.Preconditions{UID: &uid})); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s %s: %w", c.GetKind(), c.GetName(), err)
		}
		r.normal(parent, "Deleted", "Delete", "Deleted %s %s/%s", c.GetKind(), c.GetNamespace(), c.GetName())
	}
	return nil
}

// lastSpecs returns the resources' specs as the template renders them for
// the parent now (forceDestroy, say, lives there), or nothing when the
// template cannot render it: deletion then goes on from the records alone.
func lastSpecs(t *templates.Template, parent *unstructured.Unstructured) map[string]map[string]any {
	out := map[string]map[string]any{}
	res, err := t.Evaluate(templates.Input{Parent: parent, Observed: resourceState(parent)})
	if err != nil {
		return out
	}
	for _, r := range res.Resources {
		out[r.Name] = r.Spec
	}
	return out
}

func ownerOf(parent *unstructured.Unstructured) providers.Owner {
	return providers.Owner{UID: string(parent.GetUID()), Namespace: parent.GetNamespace(), Name: parent.GetName(), Kind: parent.GetKind()}
}
