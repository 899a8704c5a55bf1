package reconciler

import (
	"context"
	"encoding/base64"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
	"github.com/cuengine/engine/templates/policy"
)

// connectionSecretLocal is the local name (contract.LabelChild) of a
// resource's connection Secret. The dot keeps it apart from the local
// names of a template's children, which are CUE identifiers.
func connectionSecretLocal(resource string) string { return resource + ".connection" }

// liveConnectionSecret finds the resource's connection Secret: in the child
// cache, else on the apiserver itself, so a Secret the cache has not shown
// yet is not taken for lost. lost is true only when no object has its name:
// the credentials it held are gone, and the provider is asked for new ones.
// base is the Secret when it is this parent's, whose data is kept.
func (r *Reconciler) liveConnectionSecret(ctx context.Context, parent *unstructured.Unstructured, res templates.Resource, live *render.LiveChildren) (base *unstructured.Unstructured, lost bool, err error) {
	if parent.GetNamespace() == "" {
		return nil, false, nil // refused by planConnectionSecret
	}
	want := connectionSecretObject(res, nil)
	want.SetNamespace(parent.GetNamespace())
	want.SetLabels(map[string]string{contract.LabelChild: connectionSecretLocal(res.Name)})
	if cur := live.Get(want); cur != nil {
		return cur, false, nil
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(want.GroupVersionKind())
	err = r.live.Get(ctx, types.NamespacedName{Namespace: parent.GetNamespace(), Name: res.ConnectionSecret}, got)
	switch {
	case apierrors.IsNotFound(err):
		return nil, true, nil
	case err != nil:
		return nil, false, fmt.Errorf("reading connection Secret %s of resource %s: %w", res.ConnectionSecret, res.Name, err)
	case got.GetLabels()[contract.LabelParentUID] == string(parent.GetUID()):
		return got, false, nil
	default:
		return nil, false, nil // someone else's: applying it reports the conflict
	}
}

// planConnectionSecret adds the resource's connection Secret to the plan:
// the engine's keys of the live one (base) with the provider's sensitive
// outputs over them, so a value the provider gives only once (a password,
// when it is set) is kept. Keys someone else added are not the engine's
// and are left alone. The Secret carries a keyed hash of each value the
// engine wrote (secretSums); a value kept from base keeps its recorded
// hash, so a drift not put right is found again. Nothing is planned when
// there is neither; a Secret the plan leaves out is pruned.
func (r *Reconciler) planConnectionSecret(parent *unstructured.Unstructured, res templates.Resource, base *unstructured.Unstructured, sensitive map[string][]byte, plan *resourcePlan, st *status) {
	if base == nil && len(sensitive) == 0 {
		return
	}
	data, sums := map[string]any{}, secretSums{}
	if base != nil {
		recorded, ok := recordedSums(base)
		m, _ := base.Object["data"].(map[string]any)
		for k, v := range m {
			switch sum, ours := recorded[k]; {
			case !ok: // written before the engine kept sums: every key is taken as its own
				b, _ := v.(string)
				dec, _ := base64.StdEncoding.DecodeString(b)
				sums[k] = valueSum(parent.GetUID(), k, dec)
			case ours:
				sums[k] = sum
			default:
				continue // someone else's
			}
			data[k] = v
		}
		for k, sum := range recorded {
			if _, ok := sums[k]; !ok {
				sums[k] = sum // removed by someone else: still the engine's to put back
			}
		}
	}
	for k, v := range sensitive {
		data[k] = base64.StdEncoding.EncodeToString(v)
		sums[k] = valueSum(parent.GetUID(), k, v)
	}
	if parent.GetNamespace() == "" {
		st.fail(contract.ReasonChildRefused, terminalError(contract.ReasonChildRefused,
			fmt.Errorf("resource %s: connectionSecret needs a namespaced parent: a cluster-scoped one has no namespace to put the Secret in", res.Name)))
		return
	}
	obj := connectionSecretObject(res, data)
	ann := obj.GetAnnotations()
	ann[contract.AnnotationConnectionSecretSums] = sums.String()
	obj.SetAnnotations(ann)
	d, err := render.Desired(parent, policy.Policy{}, r.scoper, templates.Child{Name: connectionSecretLocal(res.Name), Object: obj})
	if err != nil {
		st.fail(contract.ReasonChildRefused, terminalError(contract.ReasonChildRefused, fmt.Errorf("resource %s: connection Secret: %w", res.Name, err)))
		return
	}
	plan.secrets = append(plan.secrets, d)
}

// connectionSecretObject is the Secret as the engine writes it, before the
// engine's labels and owner reference.
func connectionSecretObject(res templates.Resource, data map[string]any) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "Secret",
		"type":       "Opaque",
	}}
	obj.SetName(res.ConnectionSecret)
	obj.SetAnnotations(map[string]string{contract.AnnotationConnectionSecretOf: res.Name})
	if data != nil {
		obj.Object["data"] = data
	}
	return obj
}

// withConnectionSecrets adds the planned connection Secrets to the
// children to apply: from here on they are children like the others,
// applied, recorded in the inventory and pruned.
func withConnectionSecrets(eval *evaluation, plan *resourcePlan) *evaluation {
	if len(plan.secrets) > 0 {
		eval.children = append(eval.children, plan.secrets...)
	}
	return eval
}
