package reconciler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

// Clusters reaches the registered workload clusters a template's children
// may be put in (the engine's clusters.Registry).
type Clusters interface {
	// Cluster returns the named cluster, or a *ClusterError saying why it
	// cannot be used now.
	Cluster(ctx context.Context, name string) (RemoteCluster, error)
}

// RemoteCluster is one workload cluster as a reconcile uses it.
type RemoteCluster interface {
	// Client reads the engine's children from the cluster's cache (which
	// holds only objects labelled managed-by=engine) and writes to its
	// apiserver.
	client.Client
	// Live reads from the cluster's apiserver itself.
	Live() client.Reader
	// Watch makes events on the engine's children of one kind there
	// requeue their parents, and returns once the cache holds that kind.
	Watch(ctx context.Context, gvk schema.GroupVersionKind) error
	// ListChildren lists, from the cache, the objects of the list's kind
	// labelled with the parent's UID (contract.LabelParentUID), by an
	// index: a reconcile reads its own children, not every child of the
	// kind there. The kind must have been watched.
	ListChildren(ctx context.Context, list *unstructured.UnstructuredList, parentUID string) error
}

// ClusterError says why a workload cluster cannot be used now. Nothing
// there is created, changed or deleted because of it, and its children
// stay in the parent's inventory.
type ClusterError struct {
	Cluster string
	// Unknown: no cluster of that name is registered (or its
	// registration was removed); otherwise it is registered and does not
	// answer, or (Answered) it answered a request with an error.
	Unknown  bool
	Answered bool
	Err      error
}

func (e *ClusterError) Error() string { return e.Err.Error() }
func (e *ClusterError) Unwrap() error { return e.Err }

// remoteChildren are a parent's children in workload clusters, by
// cluster: what the parent's inventory names there, what the cluster
// holds that is provably the parent's, and what the template puts there.
type remoteChildren struct {
	inv      render.Inventory
	proofs   render.Proofs
	clusters map[string]*remoteCluster
}

// remoteCluster is one workload cluster of a parent's children.
type remoteCluster struct {
	name string
	c    RemoteCluster // nil when err
	err  *ClusterError
	// live are the parent's children there, proven (render.IsOursRemote,
	// with the inventory's proofs).
	live []*unstructured.Unstructured
	// desired and held are the template's children there: to apply, and
	// waiting for a dependency (kept, not applied).
	desired, held []*unstructured.Unstructured
	// listed are the kinds live holds all of.
	listed map[schema.GroupKind]bool
}

// observeRemote reads the parent's children in every workload cluster its
// inventory names. A cluster that cannot be read is recorded, not
// skipped in silence: its children are kept in the inventory and nothing
// there is touched.
func (r *Reconciler) observeRemote(ctx context.Context, parent *unstructured.Unstructured) *remoteChildren {
	rc := &remoteChildren{inv: render.InventoryOf(parent), proofs: render.ProofsOf(parent), clusters: map[string]*remoteCluster{}}
	for name := range rc.inv.Remote() {
		r.readCluster(ctx, parent, rc, name, nil)
	}
	return rc
}

// readCluster gets the named cluster and lists the parent's children of
// the kinds its inventory names there and of the kinds given.
func (r *Reconciler) readCluster(ctx context.Context, parent *unstructured.Unstructured, rc *remoteChildren, name string, kinds []schema.GroupVersionKind) *remoteCluster {
	cl := rc.clusters[name]
	if cl == nil {
		cl = &remoteCluster{name: name, listed: map[schema.GroupKind]bool{}}
		rc.clusters[name] = cl
		if r.clusters == nil {
			cl.err = &ClusterError{Cluster: name, Unknown: true, Err: fmt.Errorf("cluster %q is not registered: this engine serves no workload clusters (--clusters-namespace)", name)}
			return cl
		}
		c, err := r.clusters.Cluster(ctx, name)
		if err != nil {
			cl.fail(ctx, err)
			return cl
		}
		cl.c = c
		for _, e := range rc.inv.Remote()[name] {
			mapping, err := c.RESTMapper().RESTMapping(e.Kind)
			if meta.IsNoMatchError(err) {
				continue // not served there: no such object can exist
			}
			if err != nil {
				cl.fail(ctx, fmt.Errorf("finding the kind %s: %w", e.Kind, err))
				return cl
			}
			kinds = append(kinds, mapping.GroupVersionKind)
		}
	}
	if cl.err != nil {
		return cl
	}
	for _, gvk := range kinds {
		if cl.listed[gvk.GroupKind()] {
			continue
		}
		cl.listed[gvk.GroupKind()] = true
		if err := cl.c.Watch(ctx, gvk); err != nil {
			cl.fail(ctx, fmt.Errorf("watching %s: %w", gvk.Kind, err))
			return cl
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := cl.c.ListChildren(ctx, list, string(parent.GetUID())); err != nil {
			cl.fail(ctx, fmt.Errorf("listing %s children: %w", gvk.Kind, err))
			return cl
		}
		for i := range list.Items {
			obj := &list.Items[i]
			obj.SetGroupVersionKind(gvk)
			if render.IsOursRemote(parent, name, obj, rc.inv, rc.proofs) {
				cl.live = append(cl.live, obj)
			}
		}
	}
	return cl
}

// fail records why the cluster cannot be used in this reconcile. A body
// the cluster's address answered with in place of a Kubernetes Status is
// cut from the text (contract.PlainAnswer), which goes to the parent's
// status; the whole error goes to the log at debug level.
func (cl *remoteCluster) fail(ctx context.Context, err error) {
	var ce *ClusterError
	var answer apierrors.APIStatus
	switch {
	case errors.As(err, &ce):
		c := *ce
		ce = &c
	case errors.As(err, &answer):
		// The cluster answered (a Namespace not there yet, a conflict):
		// not unreachable, and said as the apiserver said it.
		ce = &ClusterError{Cluster: cl.name, Answered: true, Err: fmt.Errorf("in cluster %q: %w", cl.name, err)}
	default:
		ce = &ClusterError{Cluster: cl.name, Err: fmt.Errorf("cluster %q is unreachable: %w", cl.name, err)}
	}
	if plain := contract.PlainAnswer(ce.Err); plain != ce.Err {
		log.FromContext(ctx).V(1).Info("a workload cluster's answer in full", "cluster", cl.name, "error", ce.Err.Error())
		ce.Err = plain
	}
	cl.err, cl.c = ce, nil
}

// observed adds the content of the remote children to what the template
// sees as observed, by local name.
func (rc *remoteChildren) observed(local map[string]any) map[string]any {
	var out map[string]any
	for _, cl := range rc.clusters {
		for _, c := range cl.live {
			name := localName(c)
			if name == "" {
				continue
			}
			if out == nil {
				out = maps.Clone(local)
				if out == nil {
					out = map[string]any{}
				}
			}
			out[name] = c.Object
		}
	}
	if out == nil {
		return local
	}
	return out
}

// withLocal is the parent's live children of every cluster, for the
// readiness steps (a child's local name is unique, whatever its cluster);
// the local steps take live alone.
func (rc *remoteChildren) withLocal(live *render.LiveChildren) *render.LiveChildren {
	list := live.List()
	for _, cl := range rc.clusters {
		list = append(slices.Clip(list), cl.live...)
	}
	if len(list) == len(live.List()) {
		return live
	}
	return render.NewLiveChildren(list)
}

// splitRemote returns the evaluation with the children the template puts
// in the engine's own cluster only, for the local steps (never applied,
// pruned or recorded there), and gives the others to their clusters,
// reading each one the inventory did not name yet. The evaluation itself
// keeps every child, for readiness.
func (r *Reconciler) splitRemote(ctx context.Context, parent *unstructured.Unstructured, eval *evaluation, rc *remoteChildren) *evaluation {
	take := func(list []*unstructured.Unstructured, into func(*remoteCluster, *unstructured.Unstructured)) []*unstructured.Unstructured {
		return slices.DeleteFunc(list, func(d *unstructured.Unstructured) bool {
			name := render.ClusterOf(d)
			if name == "" {
				return false
			}
			cl := rc.clusters[name]
			if cl == nil {
				cl = &remoteCluster{name: name}
				rc.clusters[name] = cl
			}
			into(cl, d)
			return true
		})
	}
	local := *eval
	local.children = take(slices.Clone(eval.children), func(cl *remoteCluster, d *unstructured.Unstructured) { cl.desired = append(cl.desired, d) })
	local.held = take(slices.Clone(eval.held), func(cl *remoteCluster, d *unstructured.Unstructured) { cl.held = append(cl.held, d) })
	for _, name := range slices.Sorted(maps.Keys(rc.clusters)) {
		cl := rc.clusters[name]
		var kinds []schema.GroupVersionKind
		for _, d := range append(slices.Clip(cl.desired), cl.held...) {
			kinds = append(kinds, d.GroupVersionKind())
		}
		if cl.c == nil && cl.err == nil {
			delete(rc.clusters, name) // not read yet: read it now
			fresh := r.readCluster(ctx, parent, rc, name, kinds)
			fresh.desired, fresh.held = cl.desired, cl.held
			continue
		}
		r.readCluster(ctx, parent, rc, name, kinds)
	}
	return &local
}

// inventory is the part of the parent's next inventory in workload
// clusters, and its proofs, by the rule of the local children
// (render.Entries): every child the template puts there and every one
// there not pruned yet; a cluster that cannot be read keeps its entries
// and their proofs as they are.
func (rc *remoteChildren) inventory(parent *unstructured.Unstructured) (render.Inventory, render.Proofs) {
	down := map[string]bool{}
	e := render.NewEntries(parent, rc.proofs)
	for name, cl := range rc.clusters {
		if cl.err != nil {
			down[name] = true
			continue
		}
		for _, c := range cl.live {
			e.Live(render.RemoteKey(name, c), c)
		}
		for _, d := range append(slices.Clip(cl.desired), cl.held...) {
			e.Desired(render.RemoteKey(name, d))
		}
	}
	// A cluster the inventory names that is neither read nor wanted
	// keeps its entries too (it is always read: observeRemote).
	for name := range rc.inv.Remote() {
		if rc.clusters[name] == nil {
			down[name] = true
		}
	}
	for key := range rc.inv.RemoteEntries(down) {
		e.Keep(key)
	}
	return e.Inventory, e.Proofs
}

// report puts each cluster that could not be used on the status: a
// registered one that does not answer is retried with backoff
// (ClusterUnreachable); one not registered waits for its registration
// (ClusterUnknown), which requeues the parents that use it.
func (rc *remoteChildren) report(st *status, then string) {
	for _, name := range slices.Sorted(maps.Keys(rc.clusters)) {
		cl := rc.clusters[name]
		if cl.err == nil {
			continue
		}
		n := len(rc.inv.Remote()[name])
		what := fmt.Errorf("%w; the parent's %d %s there %s%s", cl.err.Err, n, plural(n, "child", "children"), plural(n, "is left as it is", "are left as they are"), then)
		if cl.err.Unknown {
			st.fail(contract.ReasonClusterUnknown, waitingError(contract.ReasonClusterUnknown, deletionRecheck, what))
			continue
		}
		if cl.err.Answered {
			// As a local child's error would be classed.
			class, reason, after := classify(cl.err.Err, 0)
			st.fail(reason, &stepError{class: class, reason: reason, after: after, err: what})
			continue
		}
		st.fail(contract.ReasonClusterUnreachable, &stepError{class: transient, reason: contract.ReasonClusterUnreachable, err: what})
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// usesClusters reports whether the parent may have children in workload
// clusters: its template may put them there, or its inventory names some.
func (r *Reconciler) usesClusters(t *templates.Template, parent *unstructured.Unstructured) bool {
	return t.Policy.Clusters.Any() || len(render.InventoryOf(parent).Remote()) > 0
}

// readyName names a child in the Ready message: "Deployment app", and
// " in cluster west" for a child in a workload cluster.
func readyName(d *unstructured.Unstructured) string {
	if cluster := render.ClusterOf(d); cluster != "" {
		return fmt.Sprintf("%s %s in cluster %s", d.GetKind(), d.GetName(), cluster)
	}
	return fmt.Sprintf("%s %s", d.GetKind(), d.GetName())
}

// remotePlaces says, for the Ready message of a parent whose children are
// all ready, which of them are in which workload cluster: "in cluster
// west: Namespace acme, Deployment app", one item per cluster by name, its
// children by kind and name; nothing when every child is local.
func remotePlaces(children []*unstructured.Unstructured) []string {
	byCluster := map[string][]*unstructured.Unstructured{}
	for _, d := range children {
		if cluster := render.ClusterOf(d); cluster != "" {
			byCluster[cluster] = append(byCluster[cluster], d)
		}
	}
	var out []string
	for _, cluster := range slices.Sorted(maps.Keys(byCluster)) {
		list := byCluster[cluster]
		slices.SortFunc(list, func(a, b *unstructured.Unstructured) int {
			return cmp.Or(cmp.Compare(namespaceFirst(a), namespaceFirst(b)), cmp.Compare(a.GetKind(), b.GetKind()), cmp.Compare(a.GetName(), b.GetName()))
		})
		names := make([]string, len(list))
		for i, d := range list {
			names[i] = d.GetKind() + " " + d.GetName()
		}
		out = append(out, fmt.Sprintf("in cluster %s: %s", cluster, strings.Join(names, ", ")))
	}
	return out
}
