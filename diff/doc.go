// Package diff says what the templates would change, without changing
// anything: the live fleet diff behind `engine diff` (Differ.DiffKind),
// and `engine diff --revision`'s comparison of two templates for one
// parent (Differ.DiffRenderings).
//
// It is read-only. It lists and gets, and its only other request is a
// server-side apply as a dry run (DryRunAll): the apiserver defaults,
// admits and merges the child as it would for the engine, and persists
// nothing.
//
// It owns:
//
//   - Differ.DiffKind: every live parent of a template's kind (or the
//     ones given), its children of the kinds the template can produce,
//     listed by the parent-UID label and kept only when provably its own
//     (render.IsOurs), rendered through render.Render under Limits (zero
//     fields take render.DefaultLimits) with the cluster's REST mapper as
//     the Scoper, so it is bound by the same limits and refuses the same
//     children as the reconcile. Each desired child is dry-run applied as
//     the engine applies it (its field manager, forced ownership,
//     render.WithAppliedHash) and compared with the live object; a name
//     held by an object the parent does not control is a conflict, left
//     untouched, or would be adopted when its owner granted it to the
//     parent, as the reconciler decides it (render.HolderOf); a live child
//     the template no longer produces would be pruned;
//   - Differ.DiffRenderings, Rendering and RenderError: one parent
//     rendered by two templates that see the same observed state (its
//     live children, its external resources as its status records them),
//     compared child by child, external resource by resource, and on the
//     template's status and readiness; no dry run, since both sides are
//     what the engine would apply;
//   - the output: a unified diff (Unified, also the format of `engine
//     test`'s golden-file failures) per object created, changed or pruned,
//     of its YAML without the fields every write changes (resource
//     version, managed fields, the applied hash, status...), and a
//     "# Kind namespace/name: ..." line per parent the template fails
//     for, per child its policy refuses or the apiserver would refuse, and
//     per conflict; Summary, the counts per kind, and FormatSummary, its
//     one line per kind.
//
// It does not own rendering, the ownership proofs or the applied hash
// (package render), loading templates or stored revisions, finding the
// parent and the revisions to compare, flags and exit status (cmd/engine).
// DiffKind also plans each external resource with its provider
// (providers.Provider.Plan, which reads only) when Differ.Providers is
// set, and says what happens to a recorded resource the template no
// longer renders (plans.go); DiffRenderings compares resource specs as
// the templates render them, calling no provider.
//
// It keeps none of the reconcile's state and does none of its work: no
// status, conditions, events, inventory or finalizer. It imports render,
// revisions, templates, providers (the contract) and contract, never
// engine (hack/imports.sh).
package diff
