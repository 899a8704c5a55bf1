package main

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
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

// addSharding adds this replica's shard Lease, on every replica, and the
// sharder, on the leader.
func (o *runOptions) addSharding(mgr ctrl.Manager, eng *engine.Engine, shard shardConfig) error {
	// The Lease is read from the apiserver, not through a cache of every
	// Lease in the cluster.
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient()})
	if err != nil {
		return err
	}
	if err := mgr.Add(&sharding.Member{Client: direct, Namespace: shard.namespace, Group: o.leaderElectionID, ID: shard.id,
		LeaseDuration: o.leaseDuration, RenewDeadline: o.renewDeadline, RetryPeriod: o.retryPeriod}); err != nil {
		return err
	}
	return mgr.Add(&sharding.Sharder{
		Client: mgr.GetClient(), Cache: mgr.GetCache(), Leases: direct, Kinds: eng.Kinds,
		Namespace: shard.namespace, Group: o.leaderElectionID, Scope: o.namespace, Every: o.retryPeriod,
		OnElected: eng.SetCoordinator,
	})
}
