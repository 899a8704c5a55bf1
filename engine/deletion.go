package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cuengine/engine/providers"
	"github.com/cuengine/engine/templates"
)

// AnnotationDeletionPolicy on a parent overrides the template's
// deletionPolicy for all its resources; "Orphan" keeps them.
const AnnotationDeletionPolicy = "engine.cuengine.dev/deletion-policy"

// reconcileDelete runs when the parent is being deleted: it deletes its
// external resources per their recorded deletion policy and the children
// the garbage collector will not (those without an owner reference), then
// drops the finalizer. What to delete comes from the records on the
// parent, never from the template; the template is asked only for the
// resources' current specs (forceDestroy lives there), and a template that
// no longer evaluates leaves them empty rather than blocking deletion.
func (r *reconciler) reconcileDelete(ctx context.Context, t *templates.Template, parent *unstructured.Unstructured, st *status) (ctrl.Result, error) {
	r.settled.Delete(types.NamespacedName{Namespace: parent.GetNamespace(), Name: parent.GetName()})
	if !controllerutil.ContainsFinalizer(parent, Finalizer) {
		st.skip = true
		return ctrl.Result{}, nil
	}
	records, err := recordedResources(parent)
	if err != nil {
		return ctrl.Result{}, err
	}
	orphanAll := parent.GetAnnotations()[AnnotationDeletionPolicy] == templates.DeletionPolicyOrphan
	specs := r.currentSpecs(t, parent)
	for _, name := range slices.Sorted(maps.Keys(records)) {
		rec := records[name]
		if orphanAll || rec.DeletionPolicy == templates.DeletionPolicyOrphan {
			log.FromContext(ctx).Info("orphaning external resource", "resource", rec.Name, "externalName", rec.ExternalName)
			continue
		}
		p, ok := r.provider(rec.Provider)
		if !ok {
			st.fail(ReasonUnknownProvider, terminalError(ReasonUnknownProvider, fmt.Errorf("resource %s: provider %q is not available in this engine; to delete the parent anyway, annotate it %s=Orphan", rec.Name, rec.Provider, AnnotationDeletionPolicy)))
			return ctrl.Result{}, nil
		}
		req := providers.Request{Name: rec.Name, ExternalName: rec.ExternalName, Owner: ownerOf(parent), Spec: specs[rec.Name], Settings: rec.Settings}
		callCtx, cancel := context.WithTimeout(ctx, providerCallTimeout)
		err := p.Delete(callCtx, req)
		cancel()
		if err != nil {
			st.fail("", fmt.Errorf("deleting resource %s (%s): %w; the finalizer is kept. To delete the parent and keep the resource, annotate it %s=Orphan", rec.Name, rec.ExternalName, err, AnnotationDeletionPolicy))
			return ctrl.Result{}, nil
		}
		r.normal(parent, "Deleted", "Delete", "Deleted %s resource %s", rec.Provider, rec.ExternalName)
	}
	if err := r.deleteUnownedChildren(ctx, parent); err != nil {
		return ctrl.Result{}, err
	}
	patch := client.MergeFromWithOptions(parent.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(parent, Finalizer)
	st.skip = true // the parent goes away with its finalizer
	if err := r.writer.Patch(ctx, parent, patch); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("removing finalizer: %w", err)
	}
	return ctrl.Result{}, nil
}

// deleteUnownedChildren deletes the children the garbage collector will not:
// those in other namespaces or cluster-scoped, which carry no owner reference.
func (r *reconciler) deleteUnownedChildren(ctx context.Context, parent *unstructured.Unstructured) error {
	live, err := r.observe(ctx, parent)
	if err != nil {
		return err
	}
	for _, c := range live.list {
		if metav1.GetControllerOfNoCopy(c) != nil {
			continue
		}
		uid := c.GetUID()
		if err := r.writer.Delete(ctx, c, client.Preconditions(metav1.Preconditions{UID: &uid})); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s %s: %w", c.GetKind(), c.GetName(), err)
		}
		r.normal(parent, "Deleted", "Delete", "Deleted %s %s/%s", c.GetKind(), c.GetNamespace(), c.GetName())
	}
	return nil
}

// currentSpecs returns the resources' specs as the template renders them
// for the parent now, or nothing when it cannot: deletion then goes on from
// the records alone.
func (r *reconciler) currentSpecs(t *templates.Template, parent *unstructured.Unstructured) map[string]map[string]any {
	out := map[string]map[string]any{}
	res, err := r.boundedEvaluate(t, parent, observedResources(storedResources(parent)))
	if err != nil {
		return out
	}
	for _, r := range res.Resources {
		out[r.Name] = r.Spec
	}
	return out
}
