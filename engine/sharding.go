package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cuengine/engine/contract"
)

// Under sharding (Options.Shard), every replica runs the engine, and each
// reconciles only the parents the sharder (package sharding) labelled with
// its shard: its parent and child caches select that label, so it holds
// nothing else. What this file adds to the engine:
//
//   - the gate in front of each kind's reconciler: no reconcile while the
//     shard's fence is closed (fence.go); a parent labelled
//     contract.LabelDrain is given up (its shard and drain labels removed,
//     which is the acknowledgement the sharder waits for before assigning
//     it to another shard) and never reconciled again here; every other
//     reconcile is logged with its shard and interval, at debug level;
//   - SetCoordinator: the one replica that is the sharder also
//     coordinates the template rollouts; the others follow them from the
//     revisions stored in the cluster (package rollout, follow.go);
//   - the engine_shard_parents gauge.

var metricShardParents = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "engine_shard_parents",
	Help: "Parents held by this replica's shard (in its cache), by shard and kind; under sharding only.",
}, []string{"shard", "kind"})

func init() {
	metrics.Registry.MustRegister(metricShardParents)
}

// fencedRequeue is when a parent the fence kept from its reconcile is
// looked at again.
const fencedRequeue = 2 * time.Second

// shardParentsEvery is how often the gauge of the shard's parents is updated.
const shardParentsEvery = 2 * time.Second

// sharded reports that sharding is on.
func (e *Engine) sharded() bool { return e.opts.Shard != "" }

// SetCoordinator says whether this replica is the sharder, which
// coordinates the template rollouts. Without sharding the engine only runs
// on the leader, which always coordinates.
func (e *Engine) SetCoordinator(on bool) {
	e.coordinator.Store(on)
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, kc := range e.kinds {
		kc.ro.Poke()
	}
}

// coordinates reports that this replica coordinates the rollouts.
func (e *Engine) coordinates() bool { return !e.sharded() || e.coordinator.Load() }

// Kinds returns the parent kinds of the templates being served.
func (e *Engine) Kinds() []schema.GroupVersionKind {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []schema.GroupVersionKind
	if e.set == nil {
		return nil
	}
	for _, t := range e.set.Templates() {
		out = append(out, t.GVK)
	}
	return out
}

// gate puts the shard's gate in front of a kind's reconciler, under sharding.
func (e *Engine) gate(gvk schema.GroupVersionKind, next reconcile.Reconciler) reconcile.Reconciler {
	if !e.sharded() {
		return next
	}
	return &shardGate{e: e, gvk: gvk, next: next}
}

// shardGate is the reconciler of a kind under sharding (see the top of the
// file). The workqueue runs one reconcile of a parent at a time, so when
// the gate releases a parent no other reconcile of it is in flight here;
// and once released it has left the shard's cache, or reads as still
// draining, so no reconcile of it starts here again. A status write of it
// may still be pending in the kind's status writer (statuswriter.go):
// the release need not wait for it, because that write is conditional on
// a resource version read before the release, which the release changes,
// and a write that conflicts is dropped, never retried over the newer
// parent (the reconcile it asks for finds the parent gone from the shard).
// Written first, it makes the release conflict and be retried instead.
type shardGate struct {
	e    *Engine
	gvk  schema.GroupVersionKind
	next reconcile.Reconciler
}

func (g *shardGate) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if err := g.e.opts.Fence.Holds(); err != nil {
		// Paused past its lease, or standing by for its shard id: the
		// parent is looked at again later, here if this replica holds
		// the shard by then; nothing is written meanwhile (fence.go).
		metricFenced.WithLabelValues("reconcile").Inc()
		log.FromContext(ctx).V(1).Info("not reconciling: the shard's fence is closed", "shard", g.e.opts.Shard, "kind", contract.KindString(g.gvk), "object", req.String(), "reason", err.Error())
		return ctrl.Result{RequeueAfter: fencedRequeue}, nil
	}
	ctx = withFencedParent(ctx, req.NamespacedName)
	parent := &unstructured.Unstructured{}
	parent.SetGroupVersionKind(g.gvk)
	err := g.e.parents.Get(ctx, req.NamespacedName, parent)
	if apierrors.IsNotFound(err) {
		return g.next.Reconcile(ctx, req) // it forgets the parent
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if parent.GetLabels()[contract.LabelDrain] != "" {
		return ctrl.Result{}, g.release(ctx, parent)
	}
	start := time.Now()
	res, err := g.next.Reconcile(ctx, req)
	log.FromContext(ctx).V(1).Info("reconciled", "shard", g.e.opts.Shard, "kind", contract.KindString(g.gvk),
		"object", req.String(), "uid", string(parent.GetUID()),
		"start", start.UTC().Format(time.RFC3339Nano), "end", time.Now().UTC().Format(time.RFC3339Nano))
	return res, err
}

// release gives a draining parent back to the sharder: both labels go in
// one write, conditional on the version read, so a parent changed since is
// looked at again rather than released from a stale copy.
func (g *shardGate) release(ctx context.Context, parent *unstructured.Unstructured) error {
	if err := g.e.fence(ctx, g.gvk, parent); err != nil {
		metricFenced.WithLabelValues("write").Inc()
		return err
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": parent.GetResourceVersion(),
		"labels":          map[string]any{contract.LabelShard: nil, contract.LabelDrain: nil},
	}})
	if err != nil {
		return err
	}
	if err := g.e.writer.Patch(ctx, parent, client.RawPatch(types.MergePatchType, patch)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("releasing a draining parent: %w", err)
	}
	log.FromContext(ctx).Info("released a parent to the sharder", "shard", g.e.opts.Shard, "kind", contract.KindString(g.gvk), "object", client.ObjectKeyFromObject(parent).String())
	return nil
}

// countShardParents keeps the engine_shard_parents gauge up to date until
// ctx ends.
func (e *Engine) countShardParents(ctx context.Context) {
	tick := time.NewTicker(shardParentsEvery)
	defer tick.Stop()
	for {
		for _, gvk := range e.Kinds() {
			kc := e.kind(gvk)
			if kc == nil || !kc.isRunning() {
				continue
			}
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			n, err := countParents(ctx, e.parents, list)
			if err != nil {
				continue
			}
			metricShardParents.WithLabelValues(e.opts.Shard, contract.KindString(gvk)).Set(float64(n))
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// listFleet lists every parent of a kind, for the rollout coordinator:
// from the cache, which under sharding holds only this shard's, so then
// from the apiserver.
func (e *Engine) listFleet(ctx context.Context, gvk schema.GroupVersionKind) ([]unstructured.Unstructured, error) {
	if !e.sharded() {
		return e.listParents(ctx, gvk)
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	var opts []client.ListOption
	if e.opts.Namespace != "" {
		opts = append(opts, client.InNamespace(e.opts.Namespace))
	}
	if err := e.apiReader.List(ctx, list, opts...); err != nil {
		return nil, fmt.Errorf("listing %s: %w", gvk.Kind, err)
	}
	return list.Items, nil
}
