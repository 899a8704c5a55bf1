// Package rollout is a kind's rollout coordinator: it records each accepted
// version of the kind's template as a revision (package revisions), moves
// the parents to the newest one as the template's rollout policy says
// (Immediate, or Progressive in waves gated on the parents' health), holds a
// revision that would delete children until a user confirms it, and rolls
// back a revision whose parents regress (fail their gates after being
// healthy on their previous revision, gate.go) or that a user undoes. The
// first wave's canaries are the policy's choice (order.go), and a pin is
// followed only as the newest template's policy for pins allows. Between
// waves the policy may add gates (soak.go): a soak whose clock is recorded
// on the revision, analysis checks run during it through an Analyzer
// (package analysis on a Prometheus; a failed check rolls back, a held one
// holds the wave), and freeze windows in which no wave starts.
// Under sharding one replica coordinates and the others follow (follow.go).
//
// It reaches its kind only through Kind (the parents, their children, the
// queue, events), so it does not import the engine, and its unit tests run
// against a fake kind. Its working state belongs to one goroutine (Init,
// then Run) and has no lock; what reconciles and readiness read is an
// immutable view published after each step and before anything the step
// does makes a parent reconcile (TemplateFor, Status): no reader waits
// behind a step's listing, evaluation or writes, and no step waits for a
// reader.
//
// It does not reconcile parents (package reconciler), render templates
// (package render: the hold check goes through render.Render, under the
// limits) or own the revisions' storage and health rule (package revisions).
package rollout
