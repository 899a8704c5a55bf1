package reconciler

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
)

// deletionRecheck is how often a deletion that waits on a dependent looks
// again, besides the dependent's own events: a stuck one is never left
// silent.
const deletionRecheck = 30 * time.Second

// dependencyOrder is what must go before what among a parent's live
// children and recorded resources. It is read from the objects themselves
// (each child's depends-on annotation, each resource's record), never from
// the template, so it holds for the parent's deletion when the template is
// broken or gone, and for children a new template revision dropped.
//
// The rule: a thing is deleted only once everything that depends on it is
// gone.
type dependencyOrder struct {
	children []*unstructured.Unstructured
	records  map[string]resourceRecord
}

func newDependencyOrder(children []*unstructured.Unstructured, records map[string]resourceRecord) *dependencyOrder {
	return &dependencyOrder{children: children, records: maps.Clone(records)}
}

// gone forgets a resource once deleted (or orphaned).
func (o *dependencyOrder) gone(name string) { delete(o.records, name) }

// dependsOn reads a child's depends-on annotation.
func dependsOn(obj *unstructured.Unstructured) []string {
	v := obj.GetAnnotations()[contract.AnnotationDependsOn]
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// localName is a child's local name, from its label.
func localName(obj *unstructured.Unstructured) string { return obj.GetLabels()[contract.LabelChild] }

// dependent is one thing still there that depends on another.
type dependent struct {
	what string                     // "ConfigMap app-config", "resource bucket"
	obj  *unstructured.Unstructured // nil for a resource
}

// dependents returns what is still there and depends on the local name,
// children first, each sorted.
func (o *dependencyOrder) dependents(name string) []dependent {
	var out []dependent
	for _, c := range o.children {
		if localName(c) != name && slices.Contains(dependsOn(c), name) {
			out = append(out, dependent{what: describe(c), obj: c})
		}
	}
	slices.SortFunc(out, func(a, b dependent) int { return strings.Compare(a.what, b.what) })
	for _, rn := range slices.Sorted(maps.Keys(o.records)) {
		if rn != name && slices.Contains(o.records[rn].DependsOn, name) {
			out = append(out, dependent{what: "resource " + rn})
		}
	}
	return out
}

// hasDependents reports whether anything still there depends on the name.
func (o *dependencyOrder) hasDependents(name string) bool { return len(o.dependents(name)) > 0 }

func describe(c *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s", c.GetKind(), c.GetName())
}

// ordered reports whether a child takes part in an order: it depends on
// something, or something still there depends on it. The engine deletes
// such a child itself, with foreground propagation (its own dependents,
// a Deployment's pods, go before it does); the others may go through the
// garbage collector.
func (o *dependencyOrder) ordered(c *unstructured.Unstructured) bool {
	return len(dependsOn(c)) > 0 || o.hasDependents(localName(c))
}

// deleteOptions are those of a child's delete: only the object observed
// (its UID), and foreground propagation when it takes part in an order.
func (o *dependencyOrder) deleteOptions(c *unstructured.Unstructured) []client.DeleteOption {
	uid := c.GetUID()
	opts := []client.DeleteOption{client.Preconditions(metav1.Preconditions{UID: &uid})}
	if o.ordered(c) {
		return append(opts, client.PropagationPolicy(metav1.DeletePropagationForeground))
	}
	return append(opts, client.PropagationPolicy(metav1.DeletePropagationBackground))
}

// deletionWait is one thing kept because what depends on it is not gone.
type deletionWait struct {
	what       string
	dependents []dependent
}

// message says what waits for what, and how far each dependent is:
// "resource bucket waits for Deployment app (being deleted; finalizers: foregroundDeletion)".
func (w deletionWait) message() string {
	parts := make([]string, len(w.dependents))
	for i, d := range w.dependents {
		parts[i] = d.what
		if d.obj != nil && d.obj.GetDeletionTimestamp() != nil {
			parts[i] += " (being deleted"
			if f := d.obj.GetFinalizers(); len(f) > 0 {
				parts[i] += "; finalizers: " + strings.Join(f, ", ")
			}
			parts[i] += ")"
		}
	}
	return w.what + " waits for " + strings.Join(parts, ", ")
}

// held returns the finalizers, other than the garbage collector's own,
// that keep a dependent from going although it is being deleted: what a
// person must look at, since nothing in the engine will clear them.
func (d dependent) held() []string {
	if d.obj == nil || d.obj.GetDeletionTimestamp() == nil {
		return nil
	}
	return slices.DeleteFunc(slices.Clone(d.obj.GetFinalizers()), func(f string) bool {
		return f == metav1.FinalizerDeleteDependents || f == metav1.FinalizerOrphanDependents
	})
}

// recordWaits puts the waits on the status: each in the Ready message
// (setReady, or the deletion's own Ready), and each dependent held by
// someone else's finalizer as a Synced problem naming it and what waits
// for it, looked at again after deletionRecheck.
func (s *status) recordWaits(waits []deletionWait) {
	var held []string
	blocked := map[string][]string{} // held dependent -> what waits for it
	for _, w := range waits {
		s.waits = append(s.waits, w.message())
		for _, d := range w.dependents {
			finalizers := d.held()
			if len(finalizers) == 0 {
				continue
			}
			key := fmt.Sprintf("%s is held by finalizer %s", d.what, strings.Join(finalizers, ", "))
			if _, seen := blocked[key]; !seen {
				held = append(held, key)
			}
			blocked[key] = append(blocked[key], w.what)
		}
	}
	for _, key := range held {
		s.fail(contract.ReasonDeletionBlocked, waitingError(contract.ReasonDeletionBlocked, deletionRecheck,
			fmt.Errorf("%s; %s waits for it", key, strings.Join(blocked[key], ", "))))
	}
}
