// Package clusters keeps the workload clusters a template's children may
// be put in: which exist, how to reach each, and whether it answers.
//
// A Source says which clusters are registered. Secrets is the one built
// in: a Secret in the engine's namespace labelled
// engine.cuengine.dev/cluster=<name>, holding a kubeconfig under the key
// "kubeconfig" (the convention of Argo CD's cluster Secrets), added,
// changed and removed while the engine runs. A kubeconfig must carry its
// credentials inline: one that runs a command (exec, auth-provider) or
// reads a file on the engine's disk is refused, naming the Secret. Another
// source (the SIG-Multicluster ClusterProfile API) implements the same
// one-method interface.
//
// A Registry runs a Source and, per registered cluster, a
// controller-runtime cluster.Cluster (its cache, client and REST mapper;
// the cache watches only what is asked of it) and a probe of its
// apiserver. Get hands out a cluster that answers, or a typed error:
// UnknownError (never registered, or removed: the removal is kept and
// said, so children there are never forgotten silently) and
// UnreachableError (registered, not answering). Status and the metrics
// engine_cluster_up and engine_cluster_last_seen_timestamp_seconds tell
// the operator. Run owns every goroutine it starts and returns after they
// end; no lock is held while a cluster starts, stops or is probed.
//
// It does not decide which templates may target a cluster (policy), put
// children there or delete them (the reconciler), and it imports contract
// only (hack/imports.sh).
package clusters
