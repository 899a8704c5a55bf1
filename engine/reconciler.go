package engine

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cuengine/engine/providers"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/revisions"
	"github.com/cuengine/engine/templates"
)

// reconciler reconciles the parents of one kind. It reaches the rest of
// the engine only through the narrow interfaces below, so a unit test can
// build one on a fake client.
type reconciler struct {
	gvk       schema.GroupVersionKind
	kind      kindTemplate
	children  childCache
	parents   client.Reader // the manager's cache
	live      client.Reader // the apiserver itself, for objects outside the child cache
	writer    client.Client
	scoper    render.Scoper
	recorder  events.EventRecorder
	providers *providers.Registry
	// resourceResync is how often external resources are observed again.
	resourceResync time.Duration
	limits         render.Limits

	// settled holds, per parent, the fingerprint of the inputs of the
	// last reconcile that found nothing to change (settled.go).
	settled sync.Map
	// status writes the statuses the reconciles build (statuswriter.go).
	status *statusWriter
	// overLimit holds the parents whose inputs went over a limit (limits.go).
	overLimit overLimit
}

// kindTemplate is what the reconciler needs of its kind's controller.
type kindTemplate interface {
	// template returns the template of the files for the kind.
	template() *templates.Template
	// templateFor returns the template a parent is reconciled with: the
	// revision it is pinned to or that the rollout puts it on (package rollout).
	// The revision is nil when the kind keeps none.
	templateFor(parent *unstructured.Unstructured) (*templates.Template, *revisions.Revision, error)
	// retired reports that the template was removed: parents being
	// deleted are still finished, nothing else is done.
	retired() bool
}

// childCache is what the reconciler needs of the engine's child cache.
type childCache interface {
	// watch makes events on children of one kind requeue their parents.
	watch(ctx context.Context, gvk schema.GroupVersionKind) error
	// list returns the objects labelled as the parent's children, of
	// every watched kind, each with its kind set: typed or unstructured,
	// only to be read.
	list(ctx context.Context, parent *unstructured.Unstructured) ([]client.Object, error)
}

// Reconcile brings one parent's children, resources and status in line
// with its template. Each step records what it finds on st; the deferred
// finish builds the status and hands it to the status writer, the only
// status write, and classifies the outcome (errors.go).
func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, err error) {
	parent, err := r.getParent(ctx, req.NamespacedName)
	if err != nil || parent == nil {
		return ctrl.Result{}, err
	}
	t, rev, terr := r.kind.templateFor(parent) // package rollout
	if t == nil {
		t = r.kind.template()
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("template", t.Path))
	st := newStatus()
	defer func() { result, err = r.finish(ctx, parent, st, result, err) }()

	if parent.GetDeletionTimestamp() != nil {
		return r.reconcileDelete(ctx, t, parent, st) // deletion.go
	}
	if terr != nil {
		return ctrl.Result{}, terr
	}
	st.revision = rev
	if r.kind.retired() {
		st.skip = true // no template: children are left as they are
		return ctrl.Result{}, nil
	}
	owned, err := r.observe(ctx, parent) // observe.go
	if err != nil {
		return ctrl.Result{}, err
	}
	if r.isSettled(t, parent, owned, st) { // settled.go
		return ctrl.Result{}, nil
	}
	live, err := owned.Read() // render/children.go
	if err != nil {
		return ctrl.Result{}, err
	}
	eval, err := r.evaluate(t, parent, live.Observed(parent), st) // evaluate.go
	if err != nil {
		return ctrl.Result{}, err
	}
	plan, err := r.reconcileResources(ctx, parent, eval, live, st) // resources.go
	if err != nil {
		return ctrl.Result{}, err
	}
	if eval, err = r.reevaluate(t, parent, eval, st); err != nil { // evaluate.go
		return ctrl.Result{}, err
	}
	if recorded, err := r.record(ctx, parent, plan, render.NextInventory(eval.children, live), st); recorded || err != nil { // record.go
		return ctrl.Result{}, err
	}
	writes, err := r.applyChildren(ctx, parent, eval.children, live, st) // apply.go
	if err != nil {
		return ctrl.Result{}, err
	}
	deletes, err := r.prune(ctx, parent, eval.children, live, st) // prune.go
	if err != nil {
		return ctrl.Result{}, err
	}
	st.setReady(eval, live)                                      // ready.go
	return r.settle(eval, writes, deletes, plan.resync, st), nil // settled.go
}

// finish is deferred by Reconcile: it hands the status over and turns how
// the reconcile ended into controller-runtime's result. The write's own
// failures are the status writer's to retry, not the reconcile's.
func (r *reconciler) finish(ctx context.Context, parent *unstructured.Unstructured, st *status, res ctrl.Result, err error) (ctrl.Result, error) {
	if class, _, _ := classify(err, 0); err != nil && class == terminal && len(st.problems) == 0 {
		st.fail("", err) // a terminal error is always shown on the parent
	}
	if werr := r.writeStatus(ctx, parent, st, err); err == nil {
		err = werr
	}
	if err == nil && !st.skip {
		err = st.err(r.resourceResync)
	}
	return outcome(res, err, r.resourceResync)
}

// getParent reads the parent from the cache; nil when it is gone.
func (r *reconciler) getParent(ctx context.Context, key types.NamespacedName) (*unstructured.Unstructured, error) {
	parent := &unstructured.Unstructured{}
	parent.SetGroupVersionKind(r.gvk)
	if err := r.parents.Get(ctx, key, parent); err != nil {
		if apierrors.IsNotFound(err) {
			r.settled.Delete(key) // gone: forget it
			r.status.forget(key)
			r.overLimit.forget(key)
			return nil, nil
		}
		return nil, err
	}
	return parent, nil
}
