package engine_test

// Adoption by grant, on a real apiserver: an object someone else created
// (kubectl's client-side apply, a server-side apply as Helm 4 does) becomes
// a child when its owner writes engine.cuengine.dev/adopt-by naming the
// parent, with its fields moved to the engine so that what the template
// drops is pruned; without the grant, or with one naming another parent,
// it is left untouched.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/diff"
	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/templates"
)

const adopterTemplate = `package adopter

parent: {
	apiVersion: "adopt.cuengine.dev/v1"
	kind:       "Adopter"
	spec: {
		target: string
		data: [string]: string
	}
}
children: settings: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: parent.spec.target
	data: parent.spec.data
}
`

var adopterGVK = schema.GroupVersionKind{Group: "adopt.cuengine.dev", Version: "v1", Kind: "Adopter"}

// farAdopterTemplate puts its child in another namespace, where it cannot
// carry an owner reference: the parent's inventory records it.
const farAdopterTemplate = `package faradopter

parent: {
	apiVersion: "adopt.cuengine.dev/v1"
	kind:       "FarAdopter"
	spec: {
		namespace: string
		data: [string]: string
	}
}
policy: crossNamespace: true
children: settings: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: {
		name:      "legacy"
		namespace: parent.spec.namespace
	}
	data: parent.spec.data
}
`

var farAdopterGVK = schema.GroupVersionKind{Group: "adopt.cuengine.dev", Version: "v1", Kind: "FarAdopter"}

// lastApplied is the annotation kubectl's client-side apply keeps.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// legacyConfigMap is a ConfigMap as someone else made it: data a and b, a
// label, and the last-applied annotation of a client-side apply.
func legacyConfigMap(ns, name string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"team": "web"}},
		Data:       map[string]string{"a": "1", "b": "2"},
	}
	applied, _ := json.Marshal(cm)
	cm.Annotations = map[string]string{lastApplied: string(applied)}
	return cm
}

// createdBy creates the object as a tool does: kubectl's client-side apply
// (a create, an Update entry of its manager) or a server-side apply (an
// Apply entry, as Helm 4 and kubectl --server-side write).
var createdBy = map[string]func(ctx context.Context, cm *corev1.ConfigMap) error{
	"kubectl-client-side-apply": func(ctx context.Context, cm *corev1.ConfigMap) error {
		return k8s.Create(ctx, cm, client.FieldOwner("kubectl-client-side-apply"))
	},
	"helm": func(ctx context.Context, cm *corev1.ConfigMap) error {
		m, err := json.Marshal(cm)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal(m, &u.Object); err != nil {
			return err
		}
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		return k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("helm"))
	},
}

// grant writes the grant as a person does, with kubectl annotate's field
// manager, beside a note of theirs that the engine must keep.
func grant(t *testing.T, cm *corev1.ConfigMap, to string) {
	t.Helper()
	patch := `{"metadata":{"annotations":{"note":"theirs","` + contract.AnnotationAdoptBy + `":"` + to + `"}}}`
	require.NoError(t, k8s.Patch(context.Background(), cm, client.RawPatch(types.MergePatchType, []byte(patch)), client.FieldOwner("kubectl-annotate")))
}

// managers lists an object's field managers as "manager operation".
func managers(obj metav1.Object) []string {
	var out []string
	for _, f := range obj.GetManagedFields() {
		out = append(out, f.Manager+" "+string(f.Operation))
	}
	slices.Sort(out)
	return out
}

// TestAdoptionByGrant: an object created by kubectl's client-side apply or
// by a server-side apply (Helm 4's way), granted to a parent, is that
// parent's child after one reconcile: the same object (UID), controlled by
// the parent, its previous manager gone from managedFields, the grant
// spent, and what the previous manager set and the template does not set
// pruned (the label, the last-applied annotation), then, when the template
// drops a data key, that key. A note written by another manager is kept.
// engine diff shows it as adopted beforehand, as the reconciler decides.
// Refused: testNoAdoptionWithoutGrant.
func TestAdoptionByGrant(t *testing.T) {
	controlPlane(t)
	set := serveTemplates(t, map[string]string{"adopter.cue": adopterTemplate, "faradopter.cue": farAdopterTemplate}, engine.Options{})
	tpl, ok := set.Lookup(adopterGVK)
	require.True(t, ok)
	for _, tool := range []string{"kubectl-client-side-apply", "helm"} {
		t.Run(tool, func(t *testing.T) {
			ctx := context.Background()
			ns := namespace(t)
			cm := legacyConfigMap(ns, "legacy")
			require.NoError(t, createdBy[tool](ctx, cm))
			before, err := getConfigMap(ctx, ns, "legacy")
			require.NoError(t, err)
			require.Contains(t, managers(before), tool+" "+string(before.ManagedFields[0].Operation), "created by %s", tool)
			grant(t, before, contract.ObjectRef(adopterGVK.GroupKind(), ns, "adopter"))

			p := parent(adopterGVK, ns, "adopter", map[string]any{"target": "legacy", "data": map[string]any{"a": "1", "b": "2"}})
			p.SetAnnotations(map[string]string{contract.AnnotationPaused: "true"})
			require.NoError(t, k8s.Create(ctx, p))

			// engine diff, while the parent is paused: adopted, not a conflict.
			var out bytes.Buffer
			differ := &diff.Differ{Client: k8s, Mapper: k8s.RESTMapper(), Out: &out}
			sum, err := differ.DiffKind(ctx, tpl, []*unstructured.Unstructured{p})
			require.NoError(t, err)
			assert.Equal(t, 1, sum.Adopted, out.String())
			assert.Zero(t, sum.Conflicts, out.String())
			assert.Contains(t, out.String(), "# Adopter "+ns+"/adopter: ConfigMap "+ns+"/legacy would be adopted: its owner granted it (engine.cuengine.dev/adopt-by)")

			annotate(t, p, contract.AnnotationPaused, nil)
			eventually(t, "adopted and synced", func(ctx context.Context) (bool, error) {
				c, err := condition(ctx, p, contract.ConditionSynced)
				if err != nil || c == nil || c.Status != metav1.ConditionTrue {
					return false, err
				}
				cm, err := getConfigMap(ctx, ns, "legacy")
				return err == nil && metav1.GetControllerOf(cm) != nil, err
			})
			after, err := getConfigMap(ctx, ns, "legacy")
			require.NoError(t, err)
			assert.Equal(t, before.UID, after.UID, "the same object")
			assert.Equal(t, p.GetUID(), metav1.GetControllerOf(after).UID, "controlled by the parent")
			assert.Equal(t, []string{"engine Apply", "kubectl-annotate Update"}, managers(after), "the previous manager's fields are the engine's")
			assert.Equal(t, map[string]string{"a": "1", "b": "2"}, after.Data)
			assert.NotContains(t, after.Labels, "team", "set by the previous manager, not by the template: pruned")
			assert.Equal(t, contract.ManagedByValue, after.Labels[contract.LabelManagedBy])
			assert.NotContains(t, after.Annotations, lastApplied, "pruned")
			assert.NotContains(t, after.Annotations, contract.AnnotationAdoptBy, "the grant is spent")
			assert.Equal(t, "theirs", after.Annotations["note"], "another manager's field is kept")
			adopted, err := hasEvent(ctx, ns, "adopter", "Adopted")
			require.NoError(t, err)
			assert.True(t, adopted, "an Adopted event on the parent")

			// A key the template drops is pruned, as any child's.
			require.NoError(t, k8s.Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"data":{"b":null}}}`))))
			eventually(t, "b pruned", func(ctx context.Context) (bool, error) {
				cm, err := getConfigMap(ctx, ns, "legacy")
				return err == nil && !hasKey(cm.Data, "b") && cm.Data["a"] == "1", err
			})
		})
	}
	t.Run("refused", func(t *testing.T) { testNoAdoptionWithoutGrant(t, tpl) })
	t.Run("elsewhere", testAdoptionElsewhere)
}

// testAdoptionElsewhere: a child in another namespace is recorded in the
// parent's inventory before it is created, so the inventory alone would
// claim an object someone else made under its name: without a grant it is
// left untouched, ChildConflict; granted, it is adopted (labelled, its
// previous manager gone, no owner reference across namespaces) and stays
// in the inventory.
func testAdoptionElsewhere(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	elsewhere := ns + "-far"
	require.NoError(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: elsewhere}}))
	cm := legacyConfigMap(elsewhere, "legacy")
	require.NoError(t, createdBy["kubectl-client-side-apply"](ctx, cm))
	before, err := getConfigMap(ctx, elsewhere, "legacy")
	require.NoError(t, err)

	p := parent(farAdopterGVK, ns, "far", map[string]any{"namespace": elsewhere, "data": map[string]any{"a": "1"}})
	require.NoError(t, k8s.Create(ctx, p))
	eventually(t, "Synced=False ChildConflict", func(ctx context.Context) (bool, error) {
		c, err := condition(ctx, p, contract.ConditionSynced)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == contract.ReasonChildConflict, err
	})
	c, err := condition(ctx, p, contract.ConditionSynced)
	require.NoError(t, err)
	assert.Equal(t, "ConfigMap "+elsewhere+"/legacy exists and is not controlled by this FarAdopter (not created by the engine for it); it is left untouched. "+
		"To hand it over to this FarAdopter, its owner runs: kubectl annotate configmap/legacy -n "+elsewhere+" engine.cuengine.dev/adopt-by=FarAdopter.adopt.cuengine.dev/"+ns+"/far; "+
		"then engine reconcile faradopter.adopt.cuengine.dev/far -n "+ns+" adopts it", c.Message)
	untouched, err := getConfigMap(ctx, elsewhere, "legacy")
	require.NoError(t, err)
	assert.Equal(t, before.ResourceVersion, untouched.ResourceVersion, "untouched without a grant")

	grant(t, untouched, contract.ObjectRef(farAdopterGVK.GroupKind(), ns, "far"))
	annotate(t, p, contract.AnnotationReconcileRequestedAt, "granted")
	eventually(t, "adopted and synced", func(ctx context.Context) (bool, error) {
		c, err := condition(ctx, p, contract.ConditionSynced)
		return err == nil && c != nil && c.Status == metav1.ConditionTrue, err
	})
	after, err := getConfigMap(ctx, elsewhere, "legacy")
	require.NoError(t, err)
	assert.Equal(t, before.UID, after.UID)
	assert.Equal(t, []string{"engine Apply", "kubectl-annotate Update"}, managers(after))
	assert.Equal(t, map[string]string{"a": "1"}, after.Data, "b, the previous manager's and not the template's, pruned")
	assert.Equal(t, string(p.GetUID()), after.Labels[contract.LabelParentUID])
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(farAdopterGVK)
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(p), live))
	assert.Equal(t, `["ConfigMap/`+elsewhere+`/legacy"]`, live.GetAnnotations()[contract.AnnotationInventory])
}

func hasKey(m map[string]string, k string) bool { _, ok := m[k]; return ok }

// testNoAdoptionWithoutGrant: an object without a grant, or with a grant
// naming another parent, is left untouched (its resource version is the
// same), and the parent is Synced=False ChildConflict with a message that
// says why and, without a grant, how to grant it; engine diff reports the
// same conflict.
func testNoAdoptionWithoutGrant(t *testing.T, tpl *templates.Template) {
	for _, tc := range []struct {
		name  string
		grant string // "" for none
		why   string
	}{
		{name: "no grant", why: ". To hand it over to this Adopter, its owner runs: kubectl annotate configmap/legacy -n %[1]s engine.cuengine.dev/adopt-by=Adopter.adopt.cuengine.dev/%[1]s/adopter; " +
			"then engine reconcile adopter.adopt.cuengine.dev/adopter -n %[1]s adopts it"},
		{name: "another parent", grant: "Adopter.adopt.cuengine.dev/%[1]s/other",
			why: `: its engine.cuengine.dev/adopt-by grant names "Adopter.adopt.cuengine.dev/%[1]s/other", not this Adopter (Adopter.adopt.cuengine.dev/%[1]s/adopter)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			ns := namespace(t)
			cm := legacyConfigMap(ns, "legacy")
			require.NoError(t, createdBy["kubectl-client-side-apply"](ctx, cm))
			if tc.grant != "" {
				grant(t, cm, fmt.Sprintf(tc.grant, ns))
			}
			before, err := getConfigMap(ctx, ns, "legacy")
			require.NoError(t, err)

			p := parent(adopterGVK, ns, "adopter", map[string]any{"target": "legacy", "data": map[string]any{"a": "1"}})
			require.NoError(t, k8s.Create(ctx, p))
			msg := "ConfigMap " + ns + "/legacy exists and is not controlled by this Adopter (not created by the engine for it); it is left untouched" + fmt.Sprintf(tc.why, ns)
			eventually(t, "Synced=False ChildConflict", func(ctx context.Context) (bool, error) {
				c, err := condition(ctx, p, contract.ConditionSynced)
				return c != nil && c.Status == metav1.ConditionFalse && c.Reason == contract.ReasonChildConflict, err
			})
			c, err := condition(ctx, p, contract.ConditionSynced)
			require.NoError(t, err)
			assert.Equal(t, msg, c.Message)
			after, err := getConfigMap(ctx, ns, "legacy")
			require.NoError(t, err)
			assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "untouched")

			var out bytes.Buffer
			differ := &diff.Differ{Client: k8s, Mapper: k8s.RESTMapper(), Out: &out}
			sum, err := differ.DiffKind(ctx, tpl, []*unstructured.Unstructured{p})
			require.NoError(t, err)
			assert.Equal(t, 1, sum.Conflicts)
			assert.Zero(t, sum.Adopted)
			assert.Contains(t, out.String(), "# Adopter "+ns+"/adopter: "+msg+"\n")
		})
	}
}
