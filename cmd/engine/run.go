package main

import (
	"cmp"
	"context"
	"errors"
	goflag "flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/evaluator"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

// runOptions are the flags of `engine run` (and of `engine dev`, which runs
// the same engine against a local cluster).
type runOptions struct {
	templates               string
	kubeconfig              string
	metrics                 metricsOptions
	probeAddr               string
	pprofAddr               string
	leaderElect             bool
	leaderElectionNamespace string
	leaderElectionID        string
	leaseDuration           time.Duration
	renewDeadline           time.Duration
	retryPeriod             time.Duration
	maxConcurrentReconciles int
	namespace               string
	installCRDs             bool
	forceCRDs               bool
	requeueQPS              float64
	quietStatusQPS          float64
	resourceResync          time.Duration
	rescanInterval          time.Duration
	limits                  render.Limits
	budget                  render.BudgetLimits
	maxEvaluationHeap       string
	evaluators              evaluatorOptions
	maxEvaluationHeapHard   string
	revisionNamespace       string
	revisionHistoryLimit    int
	logFormat               string
	zap                     zap.Options
	sharding                bool
	shardID                 string
	providerDir             string
	providerPing            pluginPing
	webhook                 webhookOptions
	prometheus              prometheusOptions
	clustersNamespace       string
	apiCompression          bool
	memoryLimitRatio        float64
}

func (o *runOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.templates, "templates", "templates", "templates directory (watched: edits are applied live)")
	o.metrics.addFlags(f)
	f.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
	f.StringVar(&o.pprofAddr, "pprof-bind-address", "0", `address of the Go profiler's /debug/pprof endpoints ("0" disables them)`)
	f.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader among replicas: only the leader reconciles")
	f.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's namespace)")
	f.StringVar(&o.leaderElectionID, "leader-election-id", "engine.cuengine.dev", "name of the leader election Lease")
	f.DurationVar(&o.leaseDuration, "leader-election-lease-duration", 15*time.Second, "how long a non-renewed lease stays valid: a killed leader is replaced within about this time")
	f.DurationVar(&o.renewDeadline, "leader-election-renew-deadline", 10*time.Second, "how long the leader keeps retrying to renew before giving up leadership")
	f.DurationVar(&o.retryPeriod, "leader-election-retry-period", 2*time.Second, "how often candidates try to acquire or renew the lease")
	f.IntVar(&o.maxConcurrentReconciles, "max-concurrent-reconciles", 4, "reconcile workers per parent kind")
	f.StringVar(&o.namespace, "namespace", "", "watch only this namespace (default: all namespaces)")
	f.BoolVar(&o.installCRDs, "install-crds", false, "apply the CRDs generated from the templates at start and on every reload")
	f.BoolVar(&o.forceCRDs, "force-crd-changes", false, "with --install-crds, apply CRD changes that could break stored objects")
	f.Float64Var(&o.requeueQPS, "requeue-qps", 200, "parents requeued per second after a template change")
	f.Float64Var(&o.quietStatusQPS, "quiet-status-qps", 20, "status writes per second, for every kind together after a burst of 100, that change nothing anyone acts on (a message worded anew, a field an older engine did not write: what an upgrade rewrites); 0 writes them at once")
	f.DurationVar(&o.resourceResync, "resource-resync", 10*time.Minute, "how often external resources are re-observed (jittered)")
	f.StringVar(&o.revisionNamespace, "revision-namespace", "", "namespace of the templates' revisions (ControllerRevisions) (default: --leader-election-namespace, else the pod's namespace, else \"default\")")
	f.IntVar(&o.revisionHistoryLimit, "revision-history-limit", 10, "revisions kept per kind, besides those an object runs or is pinned to")
	o.webhook.addFlags(f)
	o.prometheus.addFlags(f)
	f.StringVar(&o.clustersNamespace, "clusters-namespace", "", `namespace of the Secrets labelled engine.cuengine.dev/cluster that register the workload clusters children may be put in, read while a template's policy.clusters allows one ("-" turns workload clusters off) (default: --leader-election-namespace, else the pod's namespace, else "default")`)
	f.BoolVar(&o.apiCompression, "api-compression", false, "ask the apiserver for gzip-compressed responses, as the kubeconfig says (off by default, as in kube-controller-manager and kube-scheduler: near the apiserver, compression costs both sides CPU and the engine a decompressor per watch)")
	f.Float64Var(&o.memoryLimitRatio, "memory-limit-ratio", defaultMemoryLimitRatio, "share of the container's memory limit (its cgroup's) given to the Go runtime as its soft limit when GOMEMLIMIT is not set, which also sets the evaluation budget's defaults; 0 leaves the runtime without one")
	addLimitFlags(f, &o.limits)
	f.IntVar(&o.budget.MaxOverrunning, "max-overrunning-evaluations", render.DefaultMaxOverrunning, "evaluations past --evaluation-timeout that may run at once (CUE cannot be interrupted); past it an object whose evaluation overran before is Synced=False EvaluationBudgetExceeded, not evaluated, and past twice it every object is")
	o.evaluators.addFlags(f)
	f.StringVar(&o.maxEvaluationHeap, "max-evaluation-heap", "", `live heap (a quantity, "768Mi") past which an object whose evaluation overran before is refused, EvaluationBudgetExceeded, and a sixth over which every object is (default: three quarters of GOMEMLIMIT when set)`)
	f.StringVar(&o.maxEvaluationHeapHard, "max-evaluation-heap-hard", "", `live heap (a quantity, "900Mi") past which, while evaluations past --evaluation-timeout run, the engine exits (status 3) for a restart to free them; the restarted engine does not evaluate those objects again (default: seven eighths of GOMEMLIMIT when set, else none)`)
	f.DurationVar(&o.rescanInterval, "rescan-interval", time.Minute, "periodic rescan of the templates directory, a safety net behind file events")
	f.BoolVar(&o.sharding, "sharding", false, "share the parents among the replicas: each reconciles and caches only the parents labelled with its shard; the elected leader assigns them (implies --leader-elect; docs/operations.md, Sharding)")
	f.StringVar(&o.shardID, "shard-id", "", "this replica's shard under --sharding (default: $POD_NAME, else the hostname with a random suffix)")
	f.StringVar(&o.providerDir, "provider-dir", "", "directory of the provider plugins, the executables engine-provider-<name> started and supervised by the engine (default: the engine binary's directory)")
	f.DurationVar(&o.providerPing.interval, "provider-ping-interval", 5*time.Second, "how often each running provider plugin is pinged; one that misses a ping is down on /readyz until it answers, one that misses three in a row is killed and restarted")
	f.DurationVar(&o.providerPing.timeout, "provider-ping-timeout", 2*time.Second, "how long a provider plugin has to answer a ping")
	f.StringVar(&o.logFormat, "log-format", "", `log format: "console" (one line per event, key=value, coloured on a terminal) or "json" (default: console under engine dev or when stderr is a terminal, json otherwise)`)
	zfs := goflag.NewFlagSet("zap", goflag.ContinueOnError)
	o.zap.Development = false
	o.zap.BindFlags(zfs)
	f.AddGoFlagSet(zfs)
	_ = f.MarkDeprecated("zap-encoder", "use --log-format")
}

func newRunCommand() *cobra.Command {
	o := &runOptions{}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Reconcile every templated kind in the cluster (the controller)",
		Long: `Run connects to the cluster (--kubeconfig, $KUBECONFIG, or in-cluster), starts
one controller per template in --templates, and keeps them in line with the
directory: edits take effect within seconds, a broken edit keeps the last good
version serving.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.setLogger(cmd, false); err != nil {
				return err
			}
			if o.memoryLimitRatio < 0 || o.memoryLimitRatio > 1 {
				return fmt.Errorf("--memory-limit-ratio %v: want a share between 0 and 1", o.memoryLimitRatio)
			}
			setMemoryLimit(ctrl.Log.WithName("engine"), o.memoryLimitRatio, memlimit.FromCgroup)
			o.evaluators.containerLimit = memlimit.FromCgroup
			cfg, err := o.restConfig()
			if err != nil {
				return err
			}
			return o.run(cmd, cfg)
		},
	}
	o.addFlags(cmd)
	cmd.Flags().StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or in-cluster)")
	return cmd
}

func (o *runOptions) restConfig() (*rest.Config, error) {
	if o.kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	}
	return ctrl.GetConfig()
}

// apiConfig is cfg with the engine's choice of compression: none unless
// --api-compression, which leaves it to the kubeconfig (its
// disable-compression). kube-controller-manager and kube-scheduler turn it
// off too (kubernetes/kubernetes#80919): near the apiserver gzip costs
// both sides CPU, and since WatchList responses are compressed
// (WatchListCompression), every watch of the engine's caches holds a
// decompressor (3-4 MiB of peak RSS on the bench, docs/benchmarks.md).
func (o *runOptions) apiConfig(cfg *rest.Config) *rest.Config {
	if o.apiCompression {
		return cfg
	}
	cfg = rest.CopyConfig(cfg)
	cfg.DisableCompression = true
	return cfg
}

// run starts the manager and the engine and blocks until the command's
// context ends: it loads the templates, decodes the flags that take more
// than parsing, builds the manager and then the engine on it, and starts
// the manager with the runnables every replica runs.
func (o *runOptions) run(cmd *cobra.Command, cfg *rest.Config) error {
	ctx := cmd.Context()
	cfg = o.apiConfig(cfg)
	logger := ctrl.Log.WithName("engine")
	loaded, err := o.loadTemplates(cfg, logger)
	if err != nil {
		return err
	}
	flags, err := o.decodeFlags()
	if err != nil {
		return err
	}
	mgr, member, err := o.buildManager(cfg, flags.shard, logger)
	if err != nil {
		return err
	}
	eng, plugins, err := o.buildEngine(ctx, cfg, mgr, member, flags, loaded, logger)
	if err != nil {
		return err
	}
	if err := o.addRunnables(ctx, mgr, eng, plugins, loaded, logger); err != nil {
		return err
	}
	logger.Info("starting", "templates", loaded.set.Root, "kinds", len(loaded.set.Templates()), "leaderElect", o.leaderElect || o.sharding, "shard", flags.shard.id)
	err = mgr.Start(ctx)
	if x := eng.HeapExceeded(); x != nil {
		return &exitError{code: exitHeapExceeded, msg: "error: " + x.Error()}
	}
	return err
}

// loadedTemplates are the templates `engine run` starts with.
type loadedTemplates struct {
	set     *templates.Set
	loadErr error                 // why the directory loaded only in part (set serves the rest), nil when whole
	schemas templates.LoadOptions // how every reload loads them too
}

// loadTemplates loads --templates. Children of kinds neither built in nor
// the templates' own are checked against the cluster's OpenAPI schemas, at
// start and at every reload.
func (o *runOptions) loadTemplates(cfg *rest.Config, logger logr.Logger) (loadedTemplates, error) {
	cluster, err := engine.NewClusterSchemas(cfg)
	if err != nil {
		return loadedTemplates{}, err
	}
	schemas := templates.LoadOptions{Cluster: cluster}
	set, loadErr := templates.LoadWith(o.templates, schemas)
	if loadErr != nil {
		// Templates only too large to store: their kinds serve their
		// newest stored revision, the failure reported as a reload's.
		var le *templates.LoadError
		if !errors.As(loadErr, &le) || le.Servable == nil {
			return loadedTemplates{}, &exitError{code: 1, msg: "templates: " + loadErr.Error()}
		}
		set = le.Servable
	}
	for _, u := range set.Unchecked() {
		logger.Info("child kind has no schema; its children are not checked", "template", u.Template, "child", u.Child, "kind", u.Kind.String())
	}
	return loadedTemplates{set: set, loadErr: loadErr, schemas: schemas}, nil
}

// runFlags are the flags of `engine run` that take more than parsing,
// decoded.
type runFlags struct {
	shard      shardConfig
	budget     render.BudgetLimits
	evaluators *evaluator.Pool // nil with --evaluator-processes=0
}

// decodeFlags decodes and checks the flags that take more than parsing:
// the shard, the evaluation budget, the evaluator processes and the
// metrics server's.
func (o *runOptions) decodeFlags() (runFlags, error) {
	shard, err := o.shard()
	if err != nil {
		return runFlags{}, err
	}
	budget, err := o.evaluationBudget()
	if err != nil {
		return runFlags{}, err
	}
	evaluators, err := o.evaluators.pool()
	if err != nil {
		return runFlags{}, err
	}
	if evaluators != nil && evaluators.Options().TotalBytes > 0 {
		ctrl.Log.WithName("engine").Info("the engine and its evaluator processes bounded together (--evaluator-total-memory)",
			"total", fmt.Sprintf("%dMiB", evaluators.Options().TotalBytes>>20))
	}
	if err := o.metrics.validate(); err != nil {
		return runFlags{}, &exitError{code: 2, msg: err.Error()}
	}
	return runFlags{shard: shard, budget: budget, evaluators: evaluators}, nil
}

// exitHeapExceeded is the exit status of `engine run` stopped at the hard
// heap bar (--max-evaluation-heap-hard).
const exitHeapExceeded = 3

// readiness fails while the templates on disk cannot be served (the last
// good version keeps running), a kind's controller cannot run, a kind is
// stalled (every worker held for minutes), its new revision is held (it
// would delete children) or a provider plugin is down (it is being
// restarted), and says why.
func readiness(ctx context.Context, eng engineState, apiserver func(context.Context) error, plugins func() error) error {
	if err := apiserver(ctx); err != nil {
		return fmt.Errorf("the apiserver is unreachable (nothing is reconciled until it is back; nothing is lost): %w", err)
	}
	if err := plugins(); err != nil {
		return fmt.Errorf("%w (its resources wait, ProviderUnavailable; nothing is deleted)", err)
	}
	if err := eng.ReloadError(); err != nil {
		return fmt.Errorf("templates on disk not served (the last good version is): %w", err)
	}
	for _, k := range eng.Status() {
		if why := cmp.Or(k.Error, k.Stalled, k.Held); why != "" {
			return fmt.Errorf("%s (template %s): %s", k.Kind, k.Template, why)
		}
	}
	return nil
}

// engineState is what readiness reads of the engine.
type engineState interface {
	ReloadError() error
	Status() []engine.KindStatus
}

// apiserverReady asks the apiserver's own /readyz, within a few seconds.
func apiserverReady(cfg *rest.Config) (func(context.Context) error, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		return dc.RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
	}, nil
}

// podNamespace is the namespace of the pod the engine runs in, "" outside
// a cluster: where controller-runtime puts the leader election Lease too.
func podNamespace() string {
	b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// newScheme knows the built-in kinds and CRDs (for --install-crds); every
// templated kind is handled as unstructured.
func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	return s
}

// everyReplica is a runnable that runs on every replica, not only the leader.
type everyReplica func(ctx context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (everyReplica) NeedLeaderElection() bool { return false }

// addLimitFlags registers the limits of one rendering. Every command that
// renders (run, diff, render, test) takes them, so that what it shows is
// what the engine would do, and a runaway template stops each at the same
// point with the same message.
func addLimitFlags(f *pflag.FlagSet, l *render.Limits) {
	f.DurationVar(&l.EvaluationTimeout, "evaluation-timeout", render.DefaultLimits.EvaluationTimeout, "longest evaluation of a template for one object; past it the object is Synced=False EvaluationTimeout until its spec or the template changes")
	f.IntVar(&l.MaxChildren, "max-children", render.DefaultLimits.MaxChildren, "most children and resources one object may render (TooManyChildren past it)")
	f.IntVar(&l.MaxRenderedBytes, "max-rendered-bytes", render.DefaultLimits.MaxRenderedBytes, "largest rendering of one object, as JSON bytes (RenderTooLarge past it)")
}

// evaluationBudget reads the evaluation budget's flags.
func (o *runOptions) evaluationBudget() (render.BudgetLimits, error) {
	b := o.budget
	if o.maxEvaluationHeap != "" {
		q, err := resource.ParseQuantity(o.maxEvaluationHeap)
		if err != nil || q.Sign() <= 0 {
			return b, fmt.Errorf("--max-evaluation-heap: %q is not a positive quantity such as 768Mi", o.maxEvaluationHeap)
		}
		b.MaxHeapBytes = uint64(q.Value())
	}
	if o.maxEvaluationHeapHard != "" {
		q, err := resource.ParseQuantity(o.maxEvaluationHeapHard)
		if err != nil || q.Sign() <= 0 {
			return b, fmt.Errorf("--max-evaluation-heap-hard: %q is not a positive quantity such as 900Mi", o.maxEvaluationHeapHard)
		}
		b.HardHeapBytes = uint64(q.Value())
	}
	return b, nil
}
