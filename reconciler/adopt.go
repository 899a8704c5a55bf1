package reconciler

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cuengine/engine/contract"
)

// previousManagers are the field managers whose fields an adoption takes
// over: those that create objects and apply them from files, kubectl's and
// Helm's, and the apiserver's before-first-apply (what a first server-side
// apply of an object without managed fields names its fields by). Others,
// kube-controller-manager's writes or a person's `kubectl annotate`, keep
// theirs: the engine would otherwise prune what they add.
var previousManagers = []string{
	"before-first-apply",
	"helm",                      // Helm 3 updates; Helm 4 applies server-side
	"kubectl",                   // kubectl apply --server-side
	"kubectl-client-side-apply", // kubectl apply
	"kubectl-create",
	"kubectl-edit",
	"kubectl-replace",
}

// takeOver makes an object granted to the parent (render.Holder.Adopt) the
// engine's to apply, changing nothing else about it: the fields its
// previous managers own become the engine's field manager's, as if the
// engine had applied them (k8s.io/client-go/util/csaupgrade), and the grant
// is removed, spent. It is one merge patch with live's resource version as
// its precondition, so an object that changed since it was read is not
// taken over (a conflict: the reconcile retries).
//
// The engine's forced apply that follows sets the controller reference,
// labels and applied hash (and, on an object that cannot carry an owner
// reference, the create token its inventory proof holds: applyObject), and prunes what the previous managers set and
// the template does not, as for any child; what the template renders as it
// is live is not written again, so a Deployment keeps its pods.
func (r *Reconciler) takeOver(ctx context.Context, parent, live *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	patch, from, err := takeOverPatch(live)
	if err != nil {
		return nil, fmt.Errorf("adopting %s %s: %w", live.GetKind(), live.GetName(), err)
	}
	obj := live.DeepCopy()
	if err := r.writer.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(contract.FieldManager)); err != nil {
		return nil, fmt.Errorf("adopting %s %s: %w", live.GetKind(), live.GetName(), err)
	}
	managers := "no field manager"
	if len(from) > 0 {
		managers = strings.Join(from, ", ")
	}
	r.normal(parent, "Adopted", "Adopt", "Adopted %s %s/%s, granted by its owner, from %s", live.GetKind(), live.GetNamespace(), live.GetName(), managers)
	log.FromContext(ctx).Info("adopted child", "object", live.GetNamespace()+"/"+live.GetName(), "kind", live.GetKind(), "managers", from)
	return obj, nil
}

// takeOverPatch is the merge patch of takeOver, and the previous managers
// it takes the fields of, sorted. csaupgrade merges Update entries into the
// engine's Apply entry; an Apply entry of a previous manager (Helm 4,
// kubectl --server-side) is handed to it as an Update entry, and each entry
// under its own name, so that no two of one manager are taken as one. An
// entry of another API version than the first is dropped rather than
// merged (csaupgrade's rule): its fields are left to no manager, kept but
// never pruned.
func takeOverPatch(live *unstructured.Unstructured) ([]byte, []string, error) {
	obj := live.DeepCopy()
	fields := obj.GetManagedFields()
	entries := sets.New[string]()
	from := sets.New[string]()
	for i, f := range fields {
		if f.Subresource != "" || !slices.Contains(previousManagers, f.Manager) {
			continue
		}
		from.Insert(f.Manager)
		name := "engine-adopts-" + strconv.Itoa(i)
		fields[i].Manager = name
		fields[i].Operation = metav1.ManagedFieldsOperationUpdate
		entries.Insert(name)
	}
	obj.SetManagedFields(fields)
	if err := csaupgrade.UpgradeManagedFields(obj, entries, contract.FieldManager); err != nil {
		return nil, nil, fmt.Errorf("moving its fields to the engine: %w", err)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": live.GetResourceVersion(),
		"managedFields":   obj.GetManagedFields(),
		"annotations":     map[string]any{contract.AnnotationAdoptBy: nil},
	}})
	return patch, sets.List(from), err
}
