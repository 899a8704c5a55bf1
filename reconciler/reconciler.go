package reconciler

import (
	"context"
	"maps"
	"sync"
	"time"

	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/providers"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/revisions"
	"github.com/cuengine/engine/templates"
)

// Reconciler reconciles the parents of one kind. It reaches the rest of
// the engine only through the narrow interfaces below, so a unit test can
// build one on a fake client.
type Reconciler struct {
	gvk       schema.GroupVersionKind
	kind      Kind
	children  Children
	parents   client.Reader // the manager's cache
	live      client.Reader // the apiserver itself, for objects outside the child cache
	writer    client.Client
	scoper    render.Scoper
	recorder  events.EventRecorder
	providers *providers.Registry
	// references reads the objects templates reference; nil serves none.
	references References
	// resourceResync is how often external resources are observed again.
	resourceResync time.Duration
	limits         render.Limits

	// settled holds, per parent, the fingerprint of the inputs of the
	// last reconcile that found nothing to change (settled.go).
	settled sync.Map
	// applied holds, per parent, the versions of its children known to be
	// as applied, which need no dry run to judge their drift (drift.go).
	applied appliedVersions
	// status writes the statuses the reconciles build (statuswriter.go).
	status *statusWriter
	// budget remembers the parents whose inputs went over a limit, with
	// every other path that renders, and bounds the evaluations that
	// overran (render.Budget, limits.go).
	budget *render.Budget
	// fence is checked before each provider call (Options.Fence).
	fence func(context.Context) error
	// clusters reaches the workload clusters (remote.go); nil serves none.
	clusters Clusters
}

// Options are what a kind's reconciler is built from.
type Options struct {
	// GVK is the parent kind.
	GVK      schema.GroupVersionKind
	Kind     Kind
	Children Children
	// Parents reads the parents: the manager's cache.
	Parents client.Reader
	// Live is the apiserver itself, for objects outside the child cache.
	Live client.Reader
	// Writer writes children and parents, and statuses unless StatusWriter
	// is set.
	Writer client.Client
	// StatusWriter writes statuses: a client from NewStatusClient, whose
	// warnings on a status write (a field the CRD does not declare,
	// dropped) reach the parent's status and events.
	StatusWriter client.Client
	Scoper       render.Scoper
	Recorder     events.EventRecorder
	Providers    *providers.Registry
	// References reads the objects templates reference (references.go);
	// nil serves none, and a template with references fails.
	References References
	// ResourceResync is how often external resources are observed again.
	ResourceResync time.Duration
	Limits         render.Limits
	// Budget is the engine's one render.Budget, shared with the other
	// kinds and the rollouts' hold checks; nil is a budget of the kind's
	// own.
	Budget *render.Budget
	// Requeue asks for a reconcile of the parent once the cache has had
	// ConflictDelay to show what a status write conflicted with.
	Requeue func(types.NamespacedName)
	// Fence, when set, is checked before each provider call, with the
	// reconcile's context: an error refuses the call (the engine's shard
	// fence; the writers are fenced by the engine itself).
	Fence func(context.Context) error
	// Clusters reaches the registered workload clusters children may be
	// put in (remote.go); nil serves none, and a child that names one is
	// reported ClusterUnknown.
	Clusters Clusters
	// QuietStatus paces the status writes that change nothing anyone acts
	// on (quietstatus.go), shared by every kind; nil writes them at once.
	QuietStatus *rate.Limiter
}

// New returns the reconciler of one kind. Its status writer runs from
// StartStatus.
func New(o Options) *Reconciler {
	r := &Reconciler{
		gvk:            o.GVK,
		kind:           o.Kind,
		children:       o.Children,
		parents:        o.Parents,
		live:           o.Live,
		writer:         o.Writer,
		scoper:         o.Scoper,
		recorder:       o.Recorder,
		providers:      o.Providers,
		references:     o.References,
		resourceResync: o.ResourceResync,
		limits:         o.Limits,
		budget:         o.Budget,
		fence:          o.Fence,
		clusters:       o.Clusters,
	}
	if r.budget == nil {
		r.budget = render.NewBudget(render.BudgetLimits{})
	}
	statusWriter := o.StatusWriter
	if statusWriter == nil {
		statusWriter = o.Writer
	}
	r.status = newStatusWriter(o.GVK, statusWriter, o.Recorder, o.Requeue, o.QuietStatus)
	return r
}

// StartStatus runs the status writer with n goroutines until stop is
// called (statuswriter.go): with the kind's controller, which hands it
// the statuses its reconciles build.
func (r *Reconciler) StartStatus(ctx context.Context, n int) (stop func()) {
	return r.status.start(ctx, n)
}

// Kind is what the reconciler needs of its kind's controller.
type Kind interface {
	// Template returns the template of the files for the kind.
	Template() *templates.Template
	// TemplateFor returns the template a parent is reconciled with: the
	// revision it is pinned to or that the rollout puts it on (package
	// rollout), never changed once returned. The revision is nil when the
	// kind keeps none. A pin it does not follow is a *revisions.PinError.
	TemplateFor(parent *unstructured.Unstructured) (*templates.Template, *revisions.Revision, error)
	// Retired reports that the template was removed: parents being
	// deleted are still finished, nothing else is done.
	Retired() bool
}

// Children is what the reconciler needs of the engine's child cache.
type Children interface {
	// Watch makes events on children of one kind requeue their parents.
	Watch(ctx context.Context, gvk schema.GroupVersionKind) error
	// List returns the objects labelled as the parent's children, of
	// every watched kind, each with its kind set: typed or unstructured,
	// only to be read.
	List(ctx context.Context, parent *unstructured.Unstructured) ([]client.Object, error)
}

// Reconcile brings one parent's children, resources and status in line
// with its template. Each step records what it finds on st; the deferred
// finish builds the status and hands it to the status writer, the only
// status write, and classifies the outcome (errors.go).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, err error) {
	parent, err := r.getParent(ctx, req.NamespacedName)
	if err != nil || parent == nil {
		return ctrl.Result{}, err
	}
	t, rev, terr := r.kind.TemplateFor(parent) // package rollout
	if t == nil {
		t = r.kind.Template()
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("template", t.Path))
	st := newStatus()
	defer func() { result, err = r.finish(ctx, parent, st, result, err) }()

	if err := unconvertible(parent, r.gvk.GroupVersion().String()); err != nil && parent.GetDeletionTimestamp() == nil {
		return ctrl.Result{}, err // unconvertible.go
	}
	if contract.Paused(parent) {
		return r.paused(parent, st) // paused.go
	}
	if parent.GetDeletionTimestamp() != nil {
		r.forgetReferences(req.NamespacedName)       // deletion never waits for them
		return r.reconcileDelete(ctx, t, parent, st) // deletion.go
	}
	if terr != nil {
		return ctrl.Result{}, terr
	}
	st.revision = rev
	if r.kind.Retired() {
		st.skip = true // no template: children are left as they are
		return ctrl.Result{}, nil
	}
	owned, err := r.observe(ctx, parent) // observe.go
	if err != nil {
		return ctrl.Result{}, err
	}
	refs, err := r.readReferences(ctx, t, parent, owned, st) // references.go
	if err != nil {
		return ctrl.Result{}, err
	}
	remote := r.observeRemote(ctx, parent) // remote.go
	// Remote children's events are not in the fingerprint: a parent that
	// may have any is never settled.
	if !r.usesClusters(t, parent) && r.isSettled(t, parent, owned, refs, st) { // settled.go
		return ctrl.Result{}, nil
	}
	live, err := owned.Read() // render/children.go
	if err != nil {
		return ctrl.Result{}, err
	}
	eval, err := r.evaluate(ctx, t, parent, refs.With(remote.observed(live.Observed(parent))), st) // evaluate.go
	if err != nil {
		return ctrl.Result{}, err
	}
	plan, err := r.reconcileResources(ctx, parent, eval, live, st) // resources.go
	if err != nil {
		return ctrl.Result{}, err
	}
	if eval, err = r.reevaluate(ctx, t, parent, eval, st); err != nil { // evaluate.go
		return ctrl.Result{}, err
	}
	eval = withConnectionSecrets(eval, plan)          // connectionsecret.go
	all := remote.withLocal(live)                     // remote.go: every cluster's children, for readiness
	eval = waitForReady(eval, all)                    // ready.go
	local := r.splitRemote(ctx, parent, eval, remote) // remote.go
	defer remote.report(st, "")

	inv, proofs := render.NextInventory(parent, local.children, live)
	remoteInv, remoteProofs := remote.inventory(parent) // remote.go
	maps.Copy(inv, remoteInv)
	maps.Copy(proofs, remoteProofs)
	if recorded, err := r.record(ctx, parent, plan, inv, proofs, st); recorded || err != nil { // record.go
		return ctrl.Result{}, err
	}
	writes, err := r.applyChildren(ctx, parent, local.children, live, st) // apply.go
	if err != nil {
		return ctrl.Result{}, err
	}
	writes += r.applyRemote(ctx, parent, remote, st)      // remote.go
	deletes, err := r.prune(ctx, parent, local, live, st) // prune.go
	if err != nil {
		return ctrl.Result{}, err
	}
	deletes += r.pruneRemote(ctx, parent, remote, st)            // remote.go
	st.setReady(eval, all)                                       // ready.go
	return r.settle(eval, writes, deletes, plan.resync, st), nil // settled.go
}

// finish is deferred by Reconcile: it hands the status over and turns how
// the reconcile ended into controller-runtime's result. The write's own
// failures are the status writer's to retry, not the reconcile's.
func (r *Reconciler) finish(ctx context.Context, parent *unstructured.Unstructured, st *status, res ctrl.Result, err error) (ctrl.Result, error) {
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
func (r *Reconciler) getParent(ctx context.Context, key types.NamespacedName) (*unstructured.Unstructured, error) {
	parent := &unstructured.Unstructured{}
	parent.SetGroupVersionKind(r.gvk)
	if err := r.parents.Get(ctx, key, parent); err != nil {
		if apierrors.IsNotFound(err) {
			r.settled.Delete(key) // gone: forget it
			r.applied.forget(key)
			r.status.forget(key)
			r.budget.Forget(contract.KindString(r.gvk), key)
			r.forgetReferences(key)
			return nil, nil
		}
		return nil, err
	}
	return parent, nil
}
