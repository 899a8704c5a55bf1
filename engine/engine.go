package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/cuengine/engine/clusters"
	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/evaluator"
	"github.com/cuengine/engine/providers"
	"github.com/cuengine/engine/reconciler"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/rollout"
	"github.com/cuengine/engine/templates"
)

// Options configure an Engine.
type Options struct {
	// MaxConcurrentReconciles is the number of workers per parent kind.
	MaxConcurrentReconciles int
	// Namespace restricts the engine to one namespace; "" watches all.
	Namespace string
	// Providers serve the templates' external resources; nil means none.
	Providers *providers.Registry
	// RequeueQPS bounds how fast parents are requeued after a template
	// change, so a fleet of thousands does not stampede the apiserver.
	RequeueQPS float64
	// QuietStatusQPS paces, for every kind together, the status writes
	// that change nothing anyone acts on (reconciler/quietstatus.go: a
	// message worded anew, a field an older engine did not write), after
	// a burst of QuietStatusBurst: what an upgrade rewrites is spread out
	// rather than written for every parent at start. 0 is 20 a second
	// after a burst of 100; negative writes them at once.
	QuietStatusQPS   float64
	QuietStatusBurst int
	// ResourceResync is how often external resources are re-observed.
	ResourceResync time.Duration
	// InstallCRDs applies the CRDs generated from the templates when the
	// engine starts (as leader) and on every reload.
	InstallCRDs bool
	// ForceCRDChanges applies CRD changes that could break stored objects.
	ForceCRDChanges bool
	// ConversionWebhook says where the apiserver converts the parents of
	// a kind with several versions (the webhook server's /convert); nil
	// when the webhook server is off, and then such a CRD is not
	// installed (conversion.go).
	ConversionWebhook ConversionWebhook
	// Limits bound what one parent may cost; zero fields take
	// render.DefaultLimits.
	Limits render.Limits
	// EvaluationBudget caps what the evaluations that ran past the
	// timeout may hold, engine-wide (render.Budget); zero fields take the
	// defaults.
	EvaluationBudget render.BudgetLimits
	// Evaluators, when set, are the evaluator processes the evaluations
	// that may run away go to (render.Budget.Isolate, package evaluator);
	// the engine closes the pool when the manager stops. Nil evaluates
	// everything in the engine's process.
	Evaluators *evaluator.Pool
	// RevisionNamespace is where the templates' revisions are stored
	// (ControllerRevisions); "" is "default".
	RevisionNamespace string
	// RevisionHistoryLimit is how many revisions of a kind are kept,
	// besides those a parent runs or is pinned to; 0 is 10.
	RevisionHistoryLimit int
	// StallAfter is how long every worker of a kind must be held before
	// the kind is reported stalled (KindStatus.Stalled, /readyz); zero
	// takes DefaultStallAfter.
	StallAfter time.Duration
	// Shard, when set, turns sharding on: this replica reconciles only the
	// parents labelled contract.LabelShard=Shard (its caches hold nothing else),
	// on every replica rather than only the leader, and the template
	// rollouts are coordinated by the replica SetCoordinator names
	// (sharding.go). "" is one leader doing all the work.
	Shard string
	// Fence, under sharding, is the shard's Lease: every write for a
	// parent is checked by it first (fence.go). Required with Shard.
	Fence Fence
	// OnServed, when set, is called with the served set each time a
	// reload (or the retry of a refused one) changes it, from one
	// goroutine on every replica, outside the engine's locks: what the
	// admission webhook checks parents against is what the engine
	// serves, never a set it refused.
	OnServed func(context.Context, *templates.Set)
	// Analyzer runs the analysis checks of the templates' rollouts
	// (rollout.analysis) against a Prometheus server; nil is none, and a
	// wave whose rollout declares checks holds, saying so.
	Analyzer rollout.Analyzer
	// Clusters, when set, registers the workload clusters children may
	// be put in (package clusters; clusters.go): followed while a
	// template's policy.clusters allows one. Nil serves none.
	Clusters clusters.Source
	// ClusterProbeEvery is how often each workload cluster is asked
	// whether it answers; zero takes the registry's default (10s).
	ClusterProbeEvery time.Duration
	// ClusterCallTimeout bounds each call to a workload cluster's
	// apiserver; one past it marks the cluster down until its probe
	// answers. Zero: DefaultClusterCallTimeout.
	ClusterCallTimeout time.Duration
}

// Engine runs one controller per templated parent kind. Templates are
// swapped with SetTemplates while it runs.
type Engine struct {
	mgr      manager.Manager
	opts     Options
	children cache.Cache  // children only: label-selected by managed-by=engine (and the shard)
	objects  childObjects // how children are held in it: typed or unstructured, set by Start
	parents  cache.Cache  // the parents, packed and read whole (parentcache.go); under sharding the shard's
	stored   *storedReads // how the parent informers read kinds stored in another version (storedversion.go)
	writer   client.Client
	// statusWriter writes the parents' statuses, and hands the warnings
	// of each write to the reconciler (reconciler.NewStatusClient).
	statusWriter client.Client
	apiReader    client.Reader
	// refs holds the objects the parents reference (references.go).
	refs   *referenceCache
	scoper render.Scoper
	// budget is the engine's one render.Budget: every kind's reconciles
	// and hold checks share it.
	budget *render.Budget
	// quietStatus paces the quiet status writes (Options.QuietStatusQPS);
	// nil writes them at once.
	quietStatus *rate.Limiter
	recorder    events.EventRecorder
	// heapExceeded is why the engine stopped at the budget's hard heap
	// bar (heapbar.go), nil until then.
	heapExceeded atomic.Pointer[render.HeapExceeded]
	// migrations wakes the storage migration loop (migrate.go); capacity 1.
	migrations chan struct{}
	// lastMigration maps a CRD's name to how the engine's last migration
	// of its stored objects ended (migrate.go): a migrationRecord.
	lastMigration sync.Map

	mu        sync.Mutex
	set       *templates.Set
	kinds     map[schema.GroupVersionKind]*kindController
	ctx       context.Context // set once the engine runs (is leader)
	reloadErr error           // why the templates on disk are not served
	reloadGen uint64          // counts reload events; a retry stops when it moves
	// failure is the newest reload failure not yet reported, for the
	// worker failureWake wakes (reportReloadFailures).
	failure     *reloadFailure
	failureWake chan struct{}
	// refused is the newest template set the cluster refused, for the
	// worker retryWake wakes (retryRefused).
	refused   *refusedSet
	retryWake chan struct{}
	// servedWake wakes the servedNotifier (reload.go).
	servedWake chan struct{}
	// kindLoops are the kind controllers' loops (kindController.start);
	// Start waits for them.
	kindLoops sync.WaitGroup

	acceptMu sync.Mutex // serializes reloads: one set is checked and swapped at a time
	indexMu  sync.Mutex // held while registering an index
	indexed  map[schema.GroupVersionKind]bool

	// workload runs the registry of workload clusters (clusters.go); nil
	// without Options.Clusters.
	workload *workloadClusters

	// coordinator: under sharding, this replica is the sharder and
	// coordinates the rollouts (SetCoordinator).
	coordinator atomic.Bool
}

// New builds an Engine on a manager. It adds its child cache and itself to
// the manager; controllers start when the manager starts (after leader
// election when enabled).
func New(mgr manager.Manager, opts Options) (*Engine, error) {
	opts = opts.withDefaults()
	for _, name := range opts.Providers.Names() {
		reconciler.InitProviderMetrics(name)
	}
	if opts.Shard != "" && opts.Fence == nil {
		return nil, fmt.Errorf("sharding needs the shard's fence")
	}
	caches, err := addCaches(mgr, opts)
	if err != nil {
		return nil, err
	}
	statusWriter, err := reconciler.NewStatusClient(mgr.GetConfig(), client.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient(),
	})
	if err != nil {
		return nil, fmt.Errorf("creating the status client: %w", err)
	}
	dc, err := dynamic.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, fmt.Errorf("creating the reference client: %w", err)
	}
	e := &Engine{
		mgr:          mgr,
		refs:         newReferenceCache(dc, mgr.GetRESTMapper(), mgr.GetAPIReader(), opts.Namespace),
		statusWriter: statusWriter,
		opts:         opts,
		children:     caches.children,
		parents:      parentCache{caches.parents},
		stored:       caches.stored,
		writer:       mgr.GetClient(),
		apiReader:    mgr.GetAPIReader(),
		scoper:       render.MapperScoper{Mapper: mgr.GetRESTMapper()},
		budget:       render.NewBudget(opts.EvaluationBudget),
		quietStatus:  quietStatusLimiter(opts),
		recorder:     mgr.GetEventRecorder("engine"),
		migrations:   make(chan struct{}, 1),
		kinds:        map[schema.GroupVersionKind]*kindController{},
		indexed:      map[schema.GroupVersionKind]bool{},
		failureWake:  make(chan struct{}, 1),
		retryWake:    make(chan struct{}, 1),
		servedWake:   make(chan struct{}, 1),
	}
	if opts.Clusters != nil {
		e.workload = newWorkloadClusters(e, opts.Clusters)
	}
	if opts.Evaluators != nil {
		e.budget.Isolate(opts.Evaluators)
	}
	if err := e.addRunnables(); err != nil {
		return nil, err
	}
	return e, nil
}

// quietStatusLimiter is the pace of Options.QuietStatusQPS, nil when
// negative.
func quietStatusLimiter(o Options) *rate.Limiter {
	if o.QuietStatusQPS < 0 {
		return nil
	}
	return rate.NewLimiter(rate.Limit(o.QuietStatusQPS), o.QuietStatusBurst)
}

// withDefaults is o with its zero fields, and those out of range, set to
// their defaults.
func (o Options) withDefaults() Options {
	if o.MaxConcurrentReconciles <= 0 {
		o.MaxConcurrentReconciles = 4
	}
	if o.RequeueQPS <= 0 {
		o.RequeueQPS = 200
	}
	if o.QuietStatusQPS == 0 {
		o.QuietStatusQPS = 20
	}
	if o.QuietStatusBurst <= 0 {
		o.QuietStatusBurst = 100
	}
	if o.ResourceResync <= 0 {
		o.ResourceResync = 10 * time.Minute
	}
	if o.ClusterCallTimeout <= 0 {
		o.ClusterCallTimeout = DefaultClusterCallTimeout
	}
	o.Limits = o.Limits.WithDefaults()
	if o.RevisionNamespace == "" {
		o.RevisionNamespace = "default"
	}
	if o.RevisionHistoryLimit <= 0 {
		o.RevisionHistoryLimit = 10
	}
	if o.StallAfter == 0 {
		o.StallAfter = DefaultStallAfter
	}
	if o.Providers == nil {
		o.Providers = providers.NewRegistry()
	}
	return o
}

// addRunnables adds to the manager the evaluator processes' pool (closed,
// its processes waited for, when the manager stops), the engine itself,
// its heap bar and, with OnServed, the notifier that calls it.
func (e *Engine) addRunnables() error {
	if e.opts.Evaluators != nil {
		if err := e.mgr.Add(e.opts.Evaluators); err != nil {
			return err
		}
	}
	if err := e.mgr.Add(e); err != nil {
		return err
	}
	if err := e.mgr.Add(heapBar{e}); err != nil {
		return err
	}
	if e.opts.OnServed != nil {
		if err := e.mgr.Add(servedNotifier{e}); err != nil {
			return err
		}
	}
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: only the
// leader reconciles; under sharding every replica reconciles its share.
func (e *Engine) NeedLeaderElection() bool { return e.opts.Shard == "" }

// Start implements manager.Runnable. It starts a controller per template and
// stops them all when ctx ends.
func (e *Engine) Start(ctx context.Context) error {
	objects := e.childObjectsFor(ctx) // before any child is watched
	e.mu.Lock()
	e.objects = objects
	e.ctx = ctx
	set := e.set
	e.mu.Unlock()
	e.refs.start(ctx)
	if set != nil && e.opts.InstallCRDs {
		if err := InstallCRDs(ctx, e.writer, e.apiReader, set, e.opts.ForceCRDChanges, e.opts.ConversionWebhook, e.migrationNote); err != nil {
			// The kinds whose CRD is missing report it in Status and retry.
			log.FromContext(ctx).Error(err, "installing CRDs")
			e.setReloadErr(err)
		}
	}
	if set != nil {
		e.SetTemplates(set)
	}
	// The engine's own loops end with ctx; Start waits for them.
	var loops sync.WaitGroup
	defer loops.Wait()
	if retry, err := e.watchCRDs(ctx); err != nil { // discovery.go
		log.FromContext(ctx).Error(err, "parents refused for a kind not served yet are not retried when its CRD is installed")
	} else {
		loops.Go(retry)
	}
	if e.sharded() {
		loops.Go(func() { e.countShardParents(ctx) })
	}
	loops.Go(func() { e.reportReloadFailures(ctx) })
	loops.Go(func() { e.migrateStored(ctx) }) // migrate.go
	loops.Go(func() { e.retryRefused(ctx) })
	if e.workload != nil {
		loops.Go(func() { e.workload.run(ctx) })
	}
	<-ctx.Done()
	e.mu.Lock()
	kinds := e.kinds
	e.kinds = map[schema.GroupVersionKind]*kindController{}
	e.ctx = nil // no kind starts from now on (SetTemplates)
	e.mu.Unlock()
	for _, kc := range kinds {
		kc.stop() // outside the engine's lock: it releases the kind's references
	}
	e.kindLoops.Wait()
	return nil
}

// SetTemplates makes set the running templates: a controller starts for each
// new kind, a changed template replaces the old one and requeues its
// parents, and a removed kind's controller stops, leaving its children as
// they are. Before the engine starts, it only records the set.
func (e *Engine) SetTemplates(set *templates.Set) {
	// The changed kinds take their template once the lock is released:
	// it may start watching a child kind, which waits for its cache. The
	// removed kinds stop then too (a stop releases their references).
	type change struct {
		kc *kindController
		t  *templates.Template
	}
	var changed []change
	var retired, stopped []*kindController
	defer func() {
		for _, c := range changed {
			c.kc.update(c.t)
		}
		for _, kc := range retired {
			kc.dropReferences() // references.go
		}
		for _, kc := range stopped {
			kc.stop()
		}
		if e.workload != nil {
			// Whether a template still needs a workload cluster, once
			// every kind holds its new template: told before, the registry
			// could read the old one and not look again.
			e.workload.changed()
		}
	}()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.set = set
	if e.ctx == nil {
		return
	}
	logger := log.FromContext(e.ctx)
	wanted := map[schema.GroupVersionKind]*templates.Template{}
	for _, t := range set.Templates() {
		wanted[t.GVK] = t
	}
	for gvk, kc := range e.kinds {
		if _, ok := wanted[gvk]; ok || kc.Retired() {
			continue
		}
		t := kc.Template()
		if t.HasResources() || t.Policy.CrossNamespace.Any() || t.Policy.ClusterScoped {
			// Its parents may carry the engine's finalizer: keep finishing
			// their deletions (which need no template), and nothing else.
			logger.Info("template removed: its children are left in place; deletions of its objects are still finished", "kind", contract.KindString(gvk), "template", t.Path)
			kc.gone.Store(true)
			retired = append(retired, kc)
			continue
		}
		logger.Info("template removed: stopping its controller, leaving its children in place", "kind", contract.KindString(gvk), "template", t.Path)
		stopped = append(stopped, kc)
		delete(e.kinds, gvk)
		e.stored.kinds.Delete(gvk)
	}
	metricRevision.Reset()
	for gvk, t := range wanted {
		metricRevision.WithLabelValues(contract.KindString(gvk), t.Path, t.Hash).Set(1)
		initKindMetrics(contract.KindString(gvk))
		if kc, ok := e.kinds[gvk]; ok {
			kc.gone.Store(false)
			changed = append(changed, change{kc, t})
			continue
		}
		kc := newKindController(e, t)
		e.kinds[gvk] = kc
		e.stored.kinds.Store(gvk, kc)
		kc.start(e.ctx)
	}
}

// KindStatus describes one parent kind's controller, for readiness details.
type KindStatus struct {
	Kind     string
	Template string
	Revision string
	Running  bool
	// Retired: the template was removed; only deletions are finished.
	Retired bool
	Error   string
	// Held says why the kind's newest revision waits for a confirmation
	// (it would delete children), or is empty.
	Held string
	// Stalled says why no object of the kind is being reconciled although
	// the controller runs (every worker held too long), or is empty.
	Stalled string
}

// BudgetStats returns the counts of the engine's evaluation budget
// (render.Budget): evaluations started, refused, past the timeout.
func (e *Engine) BudgetStats() render.BudgetStats { return e.budget.Stats() }

// Status lists the state of every kind's controller, sorted by kind.
func (e *Engine) Status() []KindStatus {
	e.mu.Lock()
	kinds := slices.Collect(maps.Values(e.kinds))
	e.mu.Unlock()
	var out []KindStatus
	for _, kc := range kinds {
		out = append(out, kc.status())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind < out[j].Kind })
	return out
}

// ensureChildIndex registers the parent-uid index for a child kind once.
func (e *Engine) ensureChildIndex(ctx context.Context, gvk schema.GroupVersionKind) error {
	e.indexMu.Lock()
	defer e.indexMu.Unlock()
	if e.indexed[gvk] {
		return nil
	}
	if err := addParentUIDIndex(ctx, e.children, e.objects.object(gvk)); err != nil { // parentindex.go
		return fmt.Errorf("indexing %s children: %w", gvk.Kind, err)
	}
	e.indexed[gvk] = true
	return nil
}
