package reconciler

import (
	"context"
	"fmt"
	"maps"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/internal/jsoncmp"
	"github.com/cuengine/engine/render"
)

// applyRemote creates and updates the children in every cluster that
// answers, Namespaces first, and returns the number of writes. A cluster
// that fails a request is recorded as unreachable and left; the others
// go on.
func (r *Reconciler) applyRemote(ctx context.Context, parent *unstructured.Unstructured, rc *remoteChildren, st *status) int {
	writes := 0
	for _, name := range slices.Sorted(maps.Keys(rc.clusters)) {
		cl := rc.clusters[name]
		if cl.c == nil {
			continue
		}
		n, err := r.applyIn(ctx, parent, cl, rc, st)
		writes += n
		if err != nil {
			cl.fail(ctx, err)
		}
	}
	return writes
}

// applyIn applies the desired children of one cluster.
func (r *Reconciler) applyIn(ctx context.Context, parent *unstructured.Unstructured, cl *remoteCluster, rc *remoteChildren, st *status) (int, error) {
	live := map[render.ChildKey]*unstructured.Unstructured{}
	for _, c := range cl.live {
		live[render.KeyOf(c)] = c
	}
	desired := slices.Clone(cl.desired)
	slices.SortStableFunc(desired, func(a, b *unstructured.Unstructured) int { return namespaceFirst(a) - namespaceFirst(b) })
	writes := 0
	for _, d := range desired {
		hash := render.AppliedHash(d)
		cur := live[render.KeyOf(d)]
		if cur == nil {
			created, taken, err := createOnly(ctx, applyIn(cl.c), d, hash, render.CreateToken(parent, render.RemoteKey(cl.name, d)))
			switch {
			case err != nil && r.applyRefused(err, st):
				continue
			case err != nil:
				return writes, err
			case created != nil:
				writes++
				r.normal(parent, "Created", "Create", "Created %s %s in cluster %s", d.GetKind(), d.GetName(), cl.name)
				continue
			}
			// The name is taken there: by this parent's child (the cache
			// has not shown it yet), or by someone else's, never touched.
			holder := &unstructured.Unstructured{}
			holder.SetGroupVersionKind(d.GroupVersionKind())
			if err := cl.c.Live().Get(ctx, client.ObjectKeyFromObject(d), holder); err != nil {
				if apierrors.IsNotFound(err) {
					return writes, fmt.Errorf("creating %s %s in cluster %s: %w (it was deleted since)", d.GetKind(), d.GetName(), cl.name, taken)
				}
				return writes, err
			}
			// The inventory the reconcile started from, and its proofs:
			// the pending token recorded before this create.
			if !render.IsOursRemote(parent, cl.name, holder, rc.inv, rc.proofs) {
				st.fail(contract.ReasonChildConflict, terminalError(contract.ReasonChildConflict,
					fmt.Errorf("%s %s in cluster %s exists and is not this parent's: it is left untouched", d.GetKind(), describeKey(d), cl.name)))
				continue
			}
			cur = holder
		}
		if cur.GetAnnotations()[contract.AnnotationAppliedHash] == hash && jsoncmp.Contains(cur.Object, d.Object) {
			continue // as desired: no write
		}
		obj := applyObject(d, cur, hash, "")
		if err := cl.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(contract.FieldManager), client.ForceOwnership); err != nil {
			err = fmt.Errorf("applying %s %s in cluster %s: %w", d.GetKind(), d.GetName(), cl.name, err)
			if r.applyRefused(err, st) {
				continue
			}
			return writes, err
		}
		if obj.GetResourceVersion() != "" && obj.GetResourceVersion() == cur.GetResourceVersion() {
			continue // the apiserver found nothing to change
		}
		writes++
		r.normal(parent, "Updated", "Update", "Updated %s %s in cluster %s", d.GetKind(), d.GetName(), cl.name)
	}
	return writes, nil
}

// namespaceFirst orders a cluster's children so that its Namespaces are
// created before what goes in them.
func namespaceFirst(obj *unstructured.Unstructured) int {
	if obj.GroupVersionKind().GroupKind() == (schema.GroupKind{Kind: "Namespace"}) {
		return 0
	}
	return 1
}

func describeKey(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}

// applyIn server-side applies obj in a workload cluster, as the engine's
// field manager taking ownership of its fields.
func applyIn(c client.Client) func(context.Context, *unstructured.Unstructured) error {
	return func(ctx context.Context, obj *unstructured.Unstructured) error {
		return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(contract.FieldManager), client.ForceOwnership)
	}
}
