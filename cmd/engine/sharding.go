package main

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/sharding"
)

// shardConfig is this replica's place under --sharding; zero without it.
type shardConfig struct {
	id        string
	namespace string // of the shards' Leases
}

// shard works out the shard id and the Leases' namespace from the flags.
func (o *runOptions) shard() (shardConfig, error) {
	if !o.sharding {
		if o.shardID != "" {
			return shardConfig{}, &exitError{code: 2, msg: "--shard-id needs --sharding"}
		}
		return shardConfig{}, nil
	}
	id := cmp.Or(o.shardID, os.Getenv("POD_NAME"))
	if id == "" {
		host, _ := os.Hostname()
		id = strings.ToLower(cmp.Or(host, "engine"))
		if len(id) > 50 {
			id = id[:50]
		}
		suffix := make([]byte, 3)
		_, _ = rand.Read(suffix)
		id = strings.Trim(id, "-_.") + "-" + hex.EncodeToString(suffix)
	}
	if errs := validation.IsValidLabelValue(id); len(errs) > 0 {
		return shardConfig{}, &exitError{code: 2, msg: fmt.Sprintf("--shard-id %q: it is a label value: %s", id, strings.Join(errs, "; "))}
	}
	ns := cmp.Or(o.leaderElectionNamespace, podNamespace())
	if ns == "" {
		return shardConfig{}, &exitError{code: 2, msg: "--sharding outside a cluster needs --leader-election-namespace (where the shards' Leases go)"}
	}
	return shardConfig{id: id, namespace: ns}, nil
}

// newMember is this replica's shard Lease, which is also the fence of its
// writes (engine.Options.Fence).
func (o *runOptions) newMember(cfg *rest.Config, scheme *runtime.Scheme, shard shardConfig) (*sharding.Member, client.Client, error) {
	// The Leases are read from the apiserver, not through a cache of
	// every Lease in the cluster.
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, nil, err
	}
	return &sharding.Member{Client: direct, Namespace: shard.namespace, Group: o.leaderElectionID, ID: shard.id,
		Identity:      sharding.NewIdentity(shard.id),
		LeaseDuration: o.leaseDuration, RenewDeadline: o.renewDeadline, RetryPeriod: o.retryPeriod}, direct, nil
}

// leaderLock is the leader election's lock, built here to know its
// holder identity, which the sharder's fence checks.
// As controller-runtime builds its own (leaderelection.NewResourceLock):
// a Lease, requests bounded by half the renew deadline.
func (o *runOptions) leaderLock(cfg *rest.Config, namespace, identity string) (resourcelock.Interface, error) {
	cfg = rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	cfg.Timeout = max(o.renewDeadline/2, time.Second)
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	coordination, err := coordinationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return resourcelock.New(resourcelock.LeasesResourceLock, namespace, o.leaderElectionID,
		core, coordination, resourcelock.ResourceLockConfig{Identity: identity})
}

// addSharding adds this replica's shard Lease, on every replica, and the
// sharder, on the leader.
func (o *runOptions) addSharding(mgr ctrl.Manager, eng *engine.Engine, member *sharding.Member, direct client.Client, leaderIdentity string) error {
	if err := mgr.Add(member); err != nil {
		return err
	}
	leader := &sharding.Leadership{Leases: direct, Namespace: member.Namespace, Name: o.leaderElectionID,
		Identity: leaderIdentity, RenewDeadline: o.renewDeadline}
	return mgr.Add(&sharding.Sharder{
		Client: mgr.GetClient(), Cache: mgr.GetCache(), Leases: direct, Kinds: eng.Kinds,
		Namespace: member.Namespace, Group: o.leaderElectionID, Scope: o.namespace, Every: o.retryPeriod,
		OnElected: eng.SetCoordinator,
		// Leadership only, not the shard's Member: a replica standing by
		// for its shard id may still be the one sharder.
		Fence: leader.Holds,
	})
}
