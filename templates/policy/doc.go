// Package policy decodes a template's policy and rollout blocks and holds
// the types the engine reads of them.
//
// What it holds:
//   - policy.go: Policy (crossNamespace, clusterScoped and clusters, as
//     Namespaces), DecodePolicy, Within (what an older revision may still
//     do under the newest template's policy), and the refusals the render
//     and the templates package word alike (ClusterRefusal,
//     NamespaceRefusal, ClusterNameProblem).
//   - rollout.go, rollout_gates.go, pins.go, canary.go: Rollout and
//     DecodeRollout: the strategy and its waves, progressDeadline and
//     maxFailures, the canaries, the pins a parent may follow, and the
//     gates between waves (soak, analysis checks, freeze windows and
//     FrozenUntil).
//   - FieldError and KnownFields: a field of a block with the wrong shape,
//     or one the engine does not read, named by its path in the block.
//
// What it does not do: it never sees a template's files or a parent. The
// templates package finds the blocks in a compiled template, calls the
// decoders, and puts a FieldError at the user's file:line; the
// checks that need the template (a child's literal namespace or cluster
// against the policy, at load) stay there, and the render applies a
// Policy to each parent's children. It imports nothing of this module but
// contract (hack/imports.sh).
package policy
