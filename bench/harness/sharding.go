package harness

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/contract"
)

// The sharding benchmark (Config.Shards): per round, the engine without
// sharding, then the engine with --sharding over each count of replicas,
// every one a separate process with its own shard id, on a fresh control
// plane; phases (a) to (d). Also one replica runs with --sharding, so that
// one against three replicas compares like with like. After (d) it records,
// per replica, the parents it holds (the shard label on the MyKinds), its
// peak RSS and CPU time, and whether it was the sharder.

// shardedPrefix names the runs of the sharded engine: "sharded-3" is three
// replicas.
const shardedPrefix = "sharded-"

// maxShards bounds the replica counts: each replica is a process on this
// machine.
const maxShards = 16

// shardGroup is the replicas' --leader-election-id, which names the group
// of their shard Leases; shardNamespace holds the Leases and the engine's
// template revisions.
const (
	shardGroup     = "bench-engine"
	shardNamespace = "bench-engine"
)

// shardLeaseArgs are the replicas' lease timings, short as in the e2e
// sharding test: the sharder's idle pass runs every retry period.
var shardLeaseArgs = []string{"--leader-election-lease-duration", "4s",
	"--leader-election-renew-deadline", "3s", "--leader-election-retry-period", "500ms"}

// sharderMessage is what the engine logs when its replica becomes the
// sharder (sharding/sharder.go, Start).
const sharderMessage = "sharding parents over the live shards"

// shardsTimeout bounds the wait for every replica's shard Lease.
const shardsTimeout = 2 * time.Minute

// replicaResult is one replica of a sharded run, at the end of phase (d).
type replicaResult struct {
	shard   string
	sharder bool
	parents int // MyKinds of the workload labelled with its shard
	usage
}

// ParseShards parses a comma-separated list of replica counts ("1,3").
func ParseShards(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("replica counts %q: %q is not a number", s, f)
		}
		out = append(out, n)
	}
	return out, checkShards(out)
}

// checkShards checks the replica counts: each from 1 to maxShards, none
// twice.
func checkShards(counts []int) error {
	for i, n := range counts {
		if n < 1 || n > maxShards {
			return fmt.Errorf("replica count %d: want 1 to %d", n, maxShards)
		}
		if slices.Contains(counts[:i], n) {
			return fmt.Errorf("replica count %d given twice", n)
		}
	}
	return nil
}

// shardedRuns returns the runs of a round of the sharding benchmark: the
// engine without sharding, then each replica count.
func shardedRuns(counts []int) []string {
	out := []string{Engine}
	for _, n := range counts {
		out = append(out, shardedPrefix+strconv.Itoa(n))
	}
	return out
}

// shardCount returns the replicas of a sharded run's name.
func shardCount(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, shardedPrefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil
}

// isSharded reports whether a run name is a sharded run's.
func isSharded(name string) bool {
	_, ok := shardCount(name)
	return ok
}

// shardID is replica i's --shard-id.
func shardID(i int) string { return "engine-" + strconv.Itoa(i) }

// shardedSpec is the engine over replicas processes under --sharding.
func (h *Harness) shardedSpec(name string, replicas int) controllerSpec {
	s := h.engineSpec("0", "") // replicas would share the ports
	s.name, s.replicas, s.edit = name, replicas, nil
	s.replicaArgs = func(i int) []string {
		return append([]string{"--sharding", "--shard-id", shardID(i), "--leader-election-id", shardGroup,
			"--leader-election-namespace", shardNamespace, "--revision-namespace", shardNamespace}, shardLeaseArgs...)
	}
	s.prepare = func(ctx context.Context, e *env, alive func() error) error {
		return waitForShards(ctx, e, replicas, h.log, alive)
	}
	return s
}

// waitForShards waits until every replica holds its shard Lease, so the
// sharder places the workload on the ring of all of them (a replica
// joining later would take its share by draining, during a phase).
func waitForShards(ctx context.Context, e *env, replicas int, log *logger, alive func() error) error {
	start := time.Now()
	tick := time.NewTicker(settleTick)
	defer tick.Stop()
	lastLog := start
	for {
		live, err := shardLeases(ctx, e)
		if err != nil {
			return err
		}
		if live == replicas {
			log.printf("  %d shard Leases held after %s", live, since(start))
			return nil
		}
		if err := alive(); err != nil {
			return err
		}
		if time.Since(start) > shardsTimeout {
			return fmt.Errorf("only %d of %d shard Leases held after %s", live, replicas, shardsTimeout)
		}
		if time.Since(lastLog) >= progressEvery {
			log.printf("  shard Leases: %d/%d after %s", live, replicas, since(start))
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// shardLeases counts the shard Leases of the group that have a holder.
func shardLeases(ctx context.Context, e *env) (int, error) {
	leases, err := e.cs.CoordinationV1().Leases(shardNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: contract.LabelShardGroup + "=" + shardGroup})
	if err != nil {
		return 0, fmt.Errorf("listing the shard Leases: %w", err)
	}
	held := 0
	for _, l := range leases.Items {
		if l.Spec.HolderIdentity != nil {
			held++
		}
	}
	return held, nil
}

// replicaResults describes each replica at the end of phase (d): its
// usage then, the workload's parents labelled with its shard, and whether
// it was the sharder.
func replicaResults(wl *workload, g group, use []usage) ([]replicaResult, error) {
	held := wl.shardCounts()
	out := make([]replicaResult, len(g))
	for i, p := range g {
		log, err := os.ReadFile(p.logPath)
		if err != nil {
			return nil, fmt.Errorf("reading replica log: %w", err)
		}
		id := shardID(i)
		out[i] = replicaResult{shard: id, parents: held[id], sharder: strings.Contains(string(log), sharderMessage)}
		if i < len(use) {
			out[i].usage = use[i]
		}
	}
	return out, nil
}

// shardCounts counts the workload's parents by their shard label, as the
// harness's cache holds them ("" for none).
func (wl *workload) shardCounts() map[string]int {
	out := map[string]int{}
	for _, obj := range wl.w.informers[onMyKinds].GetStore().List() {
		u, ok := obj.(*unstructured.Unstructured)
		if ok && u.GetNamespace() == benchNamespace {
			out[u.GetLabels()[contract.LabelShard]]++
		}
	}
	return out
}
