package reconciler

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/revisions"
	"github.com/cuengine/engine/templates/graph"
)

// prune deletes the parent's children that the template no longer produces:
// a local name that disappeared, or one whose object changed name,
// namespace or kind. It runs only after a successful evaluation, so a
// broken template never deletes anything, and only on what observe proved
// to be the parent's. A child whose presence follows observed state alone
// is kept while the spec and template are those it was produced under
// (keepsTransient). Dependents go first (order.go): a child that
// something still there depends on waits, named in Ready, for the event
// of that dependent's deletion. It returns the number of deletes.
func (r *Reconciler) prune(ctx context.Context, parent *unstructured.Unstructured, eval *evaluation, live *render.LiveChildren, st *status) (int, error) {
	// Kept by object, whatever local name it had: an object the template
	// now produces under another local name was just applied as that one.
	kept := make(map[render.ChildKey]bool, len(eval.children)+len(eval.held))
	produced := make(map[string]bool, len(eval.result.Children))
	for _, d := range append(slices.Clip(eval.children), eval.held...) {
		kept[render.ObjectKeyOf(d)] = true
	}
	for _, c := range eval.result.Children {
		produced[c.Name] = true
	}
	unchanged := sync.OnceValue(func() bool { return unchangedSince(parent, st.revision) })
	records, err := recordedResources(parent)
	if err != nil {
		return 0, err
	}
	order := newDependencyOrder(live.List(), records)
	var waits []deletionWait
	deletes := 0
	for _, c := range live.List() {
		if kept[render.ObjectKeyOf(c)] || c.GetDeletionTimestamp() != nil {
			continue
		}
		if why := keepsTransient(eval.graph, localName(c), produced, unchanged); why != "" {
			st.kept = append(st.kept, why)
			continue
		}
		if deps := order.dependents(localName(c)); len(deps) > 0 {
			waits = append(waits, deletionWait{what: describe(c), dependents: deps})
			continue
		}
		err := r.writer.Delete(ctx, c, order.deleteOptions(c)...)
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return deletes, fmt.Errorf("deleting %s %s: %w", c.GetKind(), c.GetName(), err)
		}
		if err == nil {
			deletes++
			r.normal(parent, "Deleted", "Delete", "Deleted %s %s", c.GetKind(), c.GetName())
			log.FromContext(ctx).V(1).Info("pruned child", "child", localName(c), "object", c.GetNamespace()+"/"+c.GetName())
		}
	}
	st.recordWaits(waits)
	// A deletion decided and held must not look undecided to a later
	// reconcile (keepsTransient): the status keeps the generation and
	// revision it had until nothing waits (status.go).
	st.pruneHeld = len(waits) > 0
	return deletes, nil
}

// keepsTransient says why a live child that the template no longer
// produces is kept, "" when it is pruned. It is kept when the clauses
// around its declaration read observed state and nothing else that
// changes without the spec (graph.Presence.Transient), and the
// parent's status says that the spec and the template are those of the
// last reconcile that completed (unchangedSince): then what made it go
// can only be observed state, an upstream briefly not ready or missing,
// and deleting it would undo what that upstream waited for. The record is
// the parent's status, written anyway, so it survives a restart and costs
// no write.
func keepsTransient(g *graph.Graph, name string, produced map[string]bool, unchanged func() bool) string {
	if name == "" || produced[name] || g == nil {
		return "" // produced under that name as another object
	}
	for _, n := range g.Nodes {
		if n.Kind != graph.ChildNode || n.Name != name || !n.Presence.Transient() || !unchanged() {
			continue
		}
		reads := make([]string, len(n.Presence.Observed))
		for i, o := range n.Presence.Observed {
			reads[i] = "observed." + o
		}
		return fmt.Sprintf("child %s kept: its condition reads %s, which changed; it goes when the spec or template changes", name, strings.Join(reads, ", "))
	}
	return ""
}

// unchangedSince reports whether the parent's status was written, Synced,
// for its current generation and with the template revision it is
// reconciled with now: by a reconcile that went through prune with the
// spec and template of this one. A status that is not Synced may come
// from one that stopped before prune. Without a revision (a kind that
// keeps none) a change of the template cannot be told: false.
func unchangedSince(parent *unstructured.Unstructured, rev *revisions.Revision) bool {
	if rev == nil || !contract.GenerationObserved(parent) {
		return false
	}
	stored, _, _ := unstructured.NestedMap(parent.Object, "status")
	synced := meta.FindStatusCondition(contract.ConditionsOf(stored), contract.ConditionSynced)
	if synced == nil || synced.Status != metav1.ConditionTrue || synced.ObservedGeneration != parent.GetGeneration() {
		return false
	}
	number, hash := contract.ParentRevision(parent)
	return number == rev.Number && hash == rev.Hash
}
