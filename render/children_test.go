package render

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
)

// labelled is a ConfigMap carrying the engine's labels for the parent,
// which prove nothing by themselves.
func labelled(parent *unstructured.Unstructured, ns, name, local string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetLabels(map[string]string{contract.LabelManagedBy: contract.ManagedByValue, contract.LabelParentUID: string(parent.GetUID()), contract.LabelChild: local})
	return u
}

func owned(parent *unstructured.Unstructured, obj *unstructured.Unstructured) *unstructured.Unstructured {
	obj.SetOwnerReferences([]metav1.OwnerReference{controllerRef(parent)})
	return obj
}

func names(list []client.Object) []string {
	var out []string
	for _, o := range list {
		out = append(out, o.GetName())
	}
	return out
}

// TestOwnedOf: an object is the parent's own by a controller reference to
// it, or, when it carries none, by the parent's inventory and its label;
// labels alone
// prove nothing, except on a parent with the finalizer and no inventory
// yet (kept by an engine that recorded none).
func TestOwnedOf(t *testing.T) {
	parent := testParent(tenantGVK, "acme", map[string]any{})
	other := testParent(tenantGVK, "globex", map[string]any{})
	list := func() []client.Object {
		return []client.Object{
			owned(parent, labelled(parent, testNamespace, "controlled", "a")),
			owned(other, labelled(parent, testNamespace, "someone-elses", "b")),
			labelled(parent, "elsewhere", "recorded", "c"),
			labelled(parent, "elsewhere", "forged", "d"),
			labelled(other, "elsewhere", "unlabelled", "e"),
		}
	}
	t.Run("inventory", func(t *testing.T) {
		p := parent.DeepCopy()
		p.SetAnnotations(map[string]string{contract.AnnotationInventory: Inventory{"ConfigMap/elsewhere/recorded": true, "ConfigMap/ns/someone-elses": true, "ConfigMap/elsewhere/unlabelled": true}.Encode()})
		assert.Equal(t, []string{"controlled", "recorded"}, names(OwnedOf(p, list())),
			"a controller reference to another parent wins over the inventory; an inventory entry (written before the create) without the parent's label is someone else's object")
	})
	t.Run("no inventory", func(t *testing.T) {
		assert.Equal(t, []string{"controlled"}, names(OwnedOf(parent, list())))
	})
	t.Run("an inventory that does not parse proves nothing", func(t *testing.T) {
		p := parent.DeepCopy()
		p.SetFinalizers([]string{contract.Finalizer})
		p.SetAnnotations(map[string]string{contract.AnnotationInventory: "{"})
		assert.Equal(t, Inventory{}, InventoryOf(p))
		assert.Equal(t, []string{"controlled"}, names(OwnedOf(p, list())))
	})
	t.Run("finalizer and no inventory yet", func(t *testing.T) {
		p := parent.DeepCopy()
		p.SetFinalizers([]string{contract.Finalizer})
		assert.Nil(t, InventoryOf(p))
		assert.Equal(t, []string{"controlled", "recorded", "forged"}, names(OwnedOf(p, list())))
	})
}

// TestNextInventory: the inventory records the desired children without
// an owner reference and the live ones without a controller, sorted, []
// when empty; its proofs are the token's hash for a child not created
// yet, the UID of one seen, and none for one an older engine recorded
// without.
func TestNextInventory(t *testing.T) {
	parent := testParent(tenantGVK, "acme", map[string]any{})
	parent.SetAnnotations(map[string]string{contract.AnnotationInventoryProofs: Proofs{"ConfigMap/tenant-acme/new": "token:x"}.Encode()})
	desired := []*unstructured.Unstructured{
		owned(parent, labelled(parent, testNamespace, "local", "a")),
		labelled(parent, "tenant-acme", "settings", "b"),
		labelled(parent, "tenant-acme", "new", "d"),
	}
	fresh := labelled(parent, "tenant-acme", "new", "d")
	fresh.SetUID("new-1")
	live := NewLiveChildren([]*unstructured.Unstructured{
		owned(parent, labelled(parent, testNamespace, "local", "a")),
		labelled(parent, "tenant-acme", "old", "c"),
		fresh,
	})
	inv, proofs := NextInventory(parent, desired, live)
	assert.Equal(t, `["ConfigMap/tenant-acme/new","ConfigMap/tenant-acme/old","ConfigMap/tenant-acme/settings"]`, inv.Encode())
	assert.Equal(t, Proofs{
		"ConfigMap/tenant-acme/settings": Pending(parent, "ConfigMap/tenant-acme/settings"),
		"ConfigMap/tenant-acme/new":      "uid:new-1",
	}, proofs)
	assert.Equal(t, `[]`, Inventory{}.Encode())
	inv, proofs = NextInventory(parent, nil, NewLiveChildren(nil))
	assert.Equal(t, `[]`, inv.Encode())
	assert.Empty(t, proofs)
}

// TestLiveChildren: a desired child is matched to the live object of the
// same kind, namespace, name and local name; the template sees each by its
// local name, and the external resources' recorded state.
func TestLiveChildren(t *testing.T) {
	parent := testParent(tenantGVK, "acme", map[string]any{})
	parent.Object["status"] = map[string]any{contract.StatusResources: map[string]any{
		"bucket":  map[string]any{"provider": "fake", "externalName": "b", "exists": true, "ready": true, "state": map[string]any{"arn": "x"}},
		"pending": map[string]any{"provider": "fake", "externalName": "p"},
	}}
	web := labelled(parent, testNamespace, "web", "web")
	unlabelled := labelled(parent, testNamespace, "bare", "")
	live := NewLiveChildren([]*unstructured.Unstructured{web, unlabelled})

	assert.Same(t, web, live.Get(labelled(parent, testNamespace, "web", "web")))
	assert.Nil(t, live.Get(labelled(parent, testNamespace, "web", "other")), "another local name is another child")
	assert.Equal(t, ObjectKeyOf(web), ObjectKeyOf(labelled(parent, testNamespace, "web", "other")), "the same object")
	assert.NotEqual(t, KeyOf(web), KeyOf(labelled(parent, testNamespace, "web", "other")))
	assert.Equal(t, []*unstructured.Unstructured{web, unlabelled}, live.List())

	assert.Equal(t, map[string]any{"web": web.Object, "bucket": map[string]any{"arn": "x"}}, live.Observed(parent))
}

// TestRead: a typed child reads as the unstructured object its JSON is; an
// unstructured one as it is.
func TestRead(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "c", Labels: map[string]string{contract.LabelChild: "c"}}, Data: map[string]string{"k": "v"}}
	cm.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(tenantGVK)
	live, err := OwnedChildren{cm, u}.Read()
	require.NoError(t, err)
	got := live.List()
	require.Len(t, got, 2)
	assert.Equal(t, "v1", got[0].GetAPIVersion())
	assert.Equal(t, "ConfigMap", got[0].GetKind())
	assert.Equal(t, map[string]any{"k": "v"}, got[0].Object["data"])
	assert.Same(t, u, got[1])
}
