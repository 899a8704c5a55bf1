package main

import (
	"cmp"
	"context"
	"fmt"
	"os"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/providers"
	"github.com/cuengine/engine/providers/plugin"
	"github.com/cuengine/engine/sharding"
	"github.com/cuengine/engine/templates"
	"github.com/cuengine/engine/templates/watch"
)

// What `engine run` builds before it starts the manager: the manager, the
// shard member, the engine with its plugins and webhook server, and the
// runnables every replica runs (run.go puts them in order).

// shardMember is this replica's part in --sharding; zero without it.
type shardMember struct {
	member *sharding.Member
	direct client.Client // the Leases' reader and writer, not through the cache
	// lock is the leader election's, identity its holder identity, which
	// the sharder's fence checks.
	lock     resourcelock.Interface
	identity string
}

// fence is the member as the engine's fence: nil, not a nil
// *sharding.Member, without --sharding.
func (m shardMember) fence() engine.Fence {
	if m.member == nil {
		return nil
	}
	return m.member
}

// joinShards builds this replica's shard member and the leader election's
// lock under --sharding.
func (o *runOptions) joinShards(cfg *rest.Config, shard shardConfig) (shardMember, error) {
	if !o.sharding {
		return shardMember{}, nil
	}
	member, direct, err := o.newMember(cfg, newScheme(), shard)
	if err != nil {
		return shardMember{}, err
	}
	host, _ := os.Hostname()
	identity := sharding.NewIdentity(cmp.Or(host, "engine"))
	lock, err := o.leaderLock(cfg, shard.namespace, identity)
	if err != nil {
		return shardMember{}, err
	}
	return shardMember{member: member, direct: direct, lock: lock, identity: identity}, nil
}

// buildManager builds the controller manager: its client's rate, its
// cache, its metrics server and profiler, and its leader election, on the
// shard member's lock under --sharding.
func (o *runOptions) buildManager(cfg *rest.Config, shard shardConfig, logger logr.Logger) (ctrl.Manager, shardMember, error) {
	if cfg.QPS == 0 {
		cfg.QPS = -1 // as controller-runtime does: the apiserver's priority and fairness limits
	}
	// The engine never reads managed fields: not keeping them in the cache
	// saves most of an applied object's memory.
	cacheOpts := cache.Options{DefaultTransform: cache.TransformStripManagedFields()}
	if o.namespace != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{o.namespace: {}}
	}
	member, err := o.joinShards(cfg, shard)
	if err != nil {
		return nil, shardMember{}, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        newScheme(),
		MapperProvider:                engine.NewRESTMapper,
		Cache:                         cacheOpts,
		Metrics:                       o.metrics.serverOptions(logger),
		HealthProbeBindAddress:        "0", // served by probeServer, with reasons
		PprofBindAddress:              o.pprofAddr,
		LeaderElection:                o.leaderElect || o.sharding,
		LeaderElectionID:              o.leaderElectionID,
		LeaderElectionNamespace:       o.leaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		// Under sharding, the lock whose holder identity the sharder's
		// fence checks; else the manager's own.
		LeaderElectionResourceLockInterface: member.lock,
		LeaseDuration:                       &o.leaseDuration,
		RenewDeadline:                       &o.renewDeadline,
		RetryPeriod:                         &o.retryPeriod,
	})
	if err != nil {
		return nil, shardMember{}, fmt.Errorf("creating manager: %w", err)
	}
	return mgr, member, nil
}

// addPlugins registers the provider plugins of --provider-dir and adds
// their supervisors to mgr. Every replica runs them, so a new leader or
// shard owner finds a plugin it needs up or starting at its first call.
func (o *runOptions) addPlugins(mgr ctrl.Manager, logger logr.Logger) (*providers.Registry, []*plugin.Plugin, error) {
	registry, plugins, err := newProviders(logger, o.providerDir, o.providerPing)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range plugins {
		if err := mgr.Add(everyReplica(p.Run)); err != nil {
			return nil, nil, err
		}
	}
	return registry, plugins, nil
}

// buildEngine builds the engine on mgr, with the rollouts' analyzer, the
// provider plugins, the workload clusters and, under --sharding, the
// sharder; hands it the loaded templates; and builds the webhook server.
func (o *runOptions) buildEngine(ctx context.Context, cfg *rest.Config, mgr ctrl.Manager, member shardMember, flags runFlags, loaded loadedTemplates, logger logr.Logger) (*engine.Engine, []*plugin.Plugin, error) {
	analyzer, err := o.prometheus.analyzer(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	registry, plugins, err := o.addPlugins(mgr, logger)
	if err != nil {
		return nil, nil, err
	}
	// The webhook checks parents against the set the engine serves: it
	// is built below, before the manager (and so the notifier) starts.
	var admission *hooks
	clusterSource, err := o.clusterSource(mgr.GetConfig())
	if err != nil {
		return nil, nil, err
	}
	eng, err := engine.New(mgr, engine.Options{
		OnServed:                func(ctx context.Context, set *templates.Set) { admission.serve(ctx, set) },
		MaxConcurrentReconciles: o.maxConcurrentReconciles,
		Namespace:               o.namespace,
		Providers:               registry,
		RequeueQPS:              o.requeueQPS,
		QuietStatusQPS:          quietStatusQPS(o.quietStatusQPS),
		ResourceResync:          o.resourceResync,
		InstallCRDs:             o.installCRDs,
		ForceCRDChanges:         o.forceCRDs,
		ConversionWebhook:       o.webhook.conversion(func() *hooks { return admission }),
		Limits:                  o.limits,
		EvaluationBudget:        flags.budget,
		Evaluators:              flags.evaluators,
		RevisionNamespace:       cmp.Or(o.revisionNamespace, o.leaderElectionNamespace, podNamespace(), "default"),
		RevisionHistoryLimit:    o.revisionHistoryLimit,
		Shard:                   flags.shard.id,
		Fence:                   member.fence(),
		Analyzer:                analyzer,
		Clusters:                clusterSource,
	})
	if err != nil {
		return nil, nil, err
	}
	if o.sharding {
		if err := o.addSharding(mgr, eng, member.member, member.direct, member.identity); err != nil {
			return nil, nil, err
		}
	}
	eng.SetTemplates(loaded.set)
	admission, err = o.webhook.server(ctx, mgr, loaded.set, o.limits, flags.evaluators)
	if err != nil {
		return nil, nil, err
	}
	if loaded.loadErr != nil {
		eng.Reload(ctrl.LoggerInto(ctx, logger), watch.ReloadEvent{Err: loaded.loadErr})
	}
	return eng, plugins, nil
}

// addRunnables adds to mgr the templates directory's watcher and, unless
// --health-probe-bind-address is "0" or empty, the probes' server.
func (o *runOptions) addRunnables(ctx context.Context, mgr ctrl.Manager, eng *engine.Engine, plugins []*plugin.Plugin, loaded loadedTemplates, logger logr.Logger) error {
	watcher, err := watch.New(loaded.set.Root, loaded.set, watch.Options{
		Rescan: o.rescanInterval,
		OnReload: func(ev watch.ReloadEvent) {
			eng.Reload(ctrl.LoggerInto(ctx, logger), ev)
		},
		Schemas: loaded.schemas,
	})
	if err != nil {
		return err
	}
	// Every replica follows the directory, so a new leader serves the latest
	// and every replica's readiness reflects the files.
	if err := mgr.Add(everyReplica(watcher.Run)); err != nil {
		return err
	}
	if o.probeAddr != "0" && o.probeAddr != "" {
		ping, err := apiserverReady(mgr.GetConfig())
		if err != nil {
			return err
		}
		if err := mgr.Add(&probeServer{addr: o.probeAddr, eng: eng, apiserver: ping, plugins: pluginsHealth(plugins), pluginLines: linesOf(pluginsStatus(plugins), clusterLines(eng))}); err != nil {
			return err
		}
	}
	return nil
}

// quietStatusQPS is --quiet-status-qps as engine.Options takes it: 0
// there is the default, negative no pace.
func quietStatusQPS(flag float64) float64 {
	if flag <= 0 {
		return -1
	}
	return flag
}
