package reconciler

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/providers"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

// reconcileDelete runs when the parent is being deleted. Dependents go
// first, and each thing waits until everything that depends on it is gone
// (order.go): resources are deleted through their providers (or orphaned,
// per their recorded deletion policy) once no dependent is left; children
// that take part in an order, and those the garbage collector cannot reach
// (no owner reference), are deleted by the engine, with foreground
// propagation; the other children go through the garbage collector once
// the finalizer is dropped, which happens when nothing waits any more.
//
// What to delete, and in which order, comes from the records on the
// parent and the live children, never from the template; the template is
// asked only for the resources' current specs (forceDestroy lives there),
// and a template that no longer evaluates leaves them empty rather than
// blocking deletion.
func (r *Reconciler) reconcileDelete(ctx context.Context, t *templates.Template, parent *unstructured.Unstructured, st *status) (ctrl.Result, error) {
	r.settled.Delete(types.NamespacedName{Namespace: parent.GetNamespace(), Name: parent.GetName()})
	if !controllerutil.ContainsFinalizer(parent, contract.Finalizer) {
		st.skip = true
		return ctrl.Result{}, nil
	}
	records, err := recordedResources(parent)
	if err != nil {
		return ctrl.Result{}, err
	}
	owned, err := r.observe(ctx, parent)
	if err != nil {
		return ctrl.Result{}, err
	}
	live, err := owned.Read()
	if err != nil {
		return ctrl.Result{}, err
	}
	order := newDependencyOrder(deletedWithParent(parent, live.List()), records)
	if done := r.deleteResources(ctx, t, parent, order, st); !done {
		return ctrl.Result{}, nil
	}
	if err := r.deleteChildren(ctx, parent, order); err != nil {
		return ctrl.Result{}, err
	}
	if done := r.deleteRemote(ctx, parent, st); !done { // remote.go
		return ctrl.Result{RequeueAfter: deletionRecheck}, nil
	}
	if waits := deletionWaits(order); len(waits) > 0 {
		st.recordWaits(waits)
		st.ready = condition{status: metav1.ConditionFalse, reason: contract.ReasonDeleting, message: SafeMessage("deleting: " + strings.Join(st.waits, "; "))}
		return ctrl.Result{RequeueAfter: deletionRecheck}, nil
	}
	patch := client.MergeFromWithOptions(parent.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(parent, contract.Finalizer)
	st.skip = true // the parent goes away with its finalizer
	if err := r.writer.Patch(ctx, parent, patch); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("removing finalizer: %w", err)
	}
	return ctrl.Result{}, nil
}

// deletedWithParent returns the children that go with the parent: all of
// them, unless it is deleted with --cascade=orphan, which keeps the owned
// ones (the garbage collector removes their owner references): nothing
// waits for what is kept.
func deletedWithParent(parent *unstructured.Unstructured, children []*unstructured.Unstructured) []*unstructured.Unstructured {
	if !controllerutil.ContainsFinalizer(parent, metav1.FinalizerOrphanDependents) {
		return children
	}
	return slices.DeleteFunc(slices.Clone(children), func(c *unstructured.Unstructured) bool { return metav1.GetControllerOfNoCopy(c) != nil })
}

// deleteResources deletes (or orphans) every recorded resource nothing
// left depends on, again until none can go: deleting one may free
// another. It reports false when a provider failed, recorded on st: the
// finalizer stays, and the reconcile ends.
func (r *Reconciler) deleteResources(ctx context.Context, t *templates.Template, parent *unstructured.Unstructured, order *dependencyOrder, st *status) bool {
	orphanAll := parent.GetAnnotations()[contract.AnnotationDeletionPolicy] == templates.DeletionPolicyOrphan
	var specs map[string]map[string]any
	for progress := true; progress; {
		progress = false
		for _, name := range slices.Sorted(maps.Keys(order.records)) {
			rec := order.records[name]
			if order.hasDependents(name) {
				continue
			}
			if orphanAll || rec.DeletionPolicy == templates.DeletionPolicyOrphan {
				log.FromContext(ctx).Info("orphaning external resource", "resource", rec.Name, "externalName", rec.ExternalName)
				order.gone(name)
				progress = true
				continue
			}
			p, ok := r.provider(rec.Provider)
			if !ok {
				st.fail(contract.ReasonUnknownProvider, terminalError(contract.ReasonUnknownProvider, fmt.Errorf("resource %s: provider %q is not available in this engine; to delete the parent anyway, annotate it %s=Orphan", rec.Name, rec.Provider, contract.AnnotationDeletionPolicy)))
				return false
			}
			if specs == nil {
				specs = r.currentSpecs(t, parent)
			}
			req := providers.Request{Name: rec.Name, ExternalName: rec.ExternalName, Owner: ownerOf(parent), Spec: specs[rec.Name], Settings: rec.Settings}
			callCtx, cancel := context.WithTimeout(ctx, providerCallTimeout)
			err := p.Delete(callCtx, req)
			cancel()
			if err != nil {
				st.fail("", fmt.Errorf("deleting resource %s (%s): %w; the finalizer is kept. To delete the parent and keep the resource, annotate it %s=Orphan", rec.Name, rec.ExternalName, err, contract.AnnotationDeletionPolicy))
				return false
			}
			r.normal(parent, "Deleted", "Delete", "Deleted %s resource %s", rec.Provider, rec.ExternalName)
			order.gone(name)
			progress = true
		}
	}
	return true
}

// deleteChildren deletes the children the garbage collector cannot reach
// (those in other namespaces or cluster-scoped, without an owner
// reference) and those that take part in an order, each once nothing that
// depends on it is left. A child already being deleted is left to finish.
func (r *Reconciler) deleteChildren(ctx context.Context, parent *unstructured.Unstructured, order *dependencyOrder) error {
	for _, c := range order.children {
		unowned := metav1.GetControllerOfNoCopy(c) == nil
		if (!unowned && !order.ordered(c)) || c.GetDeletionTimestamp() != nil || order.hasDependents(localName(c)) {
			continue
		}
		if err := r.writer.Delete(ctx, c, order.deleteOptions(c)...); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s %s: %w", c.GetKind(), c.GetName(), err)
		}
		r.normal(parent, "Deleted", "Delete", "Deleted %s %s/%s", c.GetKind(), c.GetNamespace(), c.GetName())
	}
	return nil
}

// deletionWaits lists what the parent's deletion still waits for: each
// resource left, and each child that must outlive a dependent. A child
// whose delete was sent and that nothing waits for does not hold the
// finalizer: it goes on its own.
func deletionWaits(order *dependencyOrder) []deletionWait {
	var waits []deletionWait
	for _, c := range order.children {
		if deps := order.dependents(localName(c)); len(deps) > 0 {
			waits = append(waits, deletionWait{what: describe(c), dependents: deps})
		}
	}
	slices.SortFunc(waits, func(a, b deletionWait) int { return strings.Compare(a.what, b.what) })
	for _, name := range slices.Sorted(maps.Keys(order.records)) {
		waits = append(waits, deletionWait{what: "resource " + name, dependents: order.dependents(name)})
	}
	return waits
}

// currentSpecs returns the resources' specs as the template renders them
// for the parent now, or nothing when it cannot: deletion then goes on from
// the records alone.
func (r *Reconciler) currentSpecs(t *templates.Template, parent *unstructured.Unstructured) map[string]map[string]any {
	out := map[string]map[string]any{}
	res, err := r.boundedRender(t, parent, render.ObservedResources(parent))
	if err != nil {
		return out
	}
	for _, r := range res.Result.Resources {
		out[r.Name] = r.Spec
	}
	return out
}
