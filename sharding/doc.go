// Package sharding spreads the parents of every templated kind over the
// engine's replicas (engine run --sharding). It owns the membership of
// the shards (each replica renews its own Lease: Member), the
// consistent-hash ring (Ring) and the sharder (Sharder), which runs on the
// elected leader and labels each parent with the shard that reconciles it
// (contract.LabelShard), moving parents when shards come and go through a
// drain handover. It does not reconcile anything: the engine does, each
// replica only the parents labelled with its shard (engine/sharding.go).
//
// Member and Leadership are also fences: Member.Holds says whether this
// process still holds its shard, Leadership.Holds whether it still leads,
// each by its own clock, so a process paused past its Lease writes nothing
// it decided before the pause (engine/fence.go, docs/operations.md,
// Fencing).
//
// The design follows timebertt/kubernetes-controller-sharding: Leases for
// membership, labels for assignment, label-selected caches, and a drain
// handover so no two replicas ever reconcile one parent at the same time.
package sharding
