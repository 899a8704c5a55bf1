package render

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/cuengine/engine/contract"
)

// TestRemoteProofs: a child of a workload cluster is the parent's only
// with the inventory entry, the parent-uid label and the entry's proof:
// the UID the engine saw, or the token it created the object with (whose
// hash alone the parent shows). A copy of the labels at the name, before
// or after the engine's create, is not; an entry an older engine recorded
// without proofs is proven as it was then; proofs that do not parse prove
// nothing.
func TestRemoteProofs(t *testing.T) {
	parent := &unstructured.Unstructured{}
	parent.SetUID("p-1")
	const key = "w1:Deployment.apps/acme/app"
	obj := func(uid, token string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment"}}
		u.SetNamespace("acme")
		u.SetName("app")
		u.SetUID(k8stypes.UID(uid))
		u.SetLabels(map[string]string{contract.LabelParentUID: "p-1"})
		if token != "" {
			u.SetAnnotations(map[string]string{contract.AnnotationCreateToken: token})
		}
		return u
	}
	inv := Inventory{key: true}
	token := CreateToken(parent, key)
	pending := Proofs{key: Pending(parent, key)}

	assert.True(t, IsOursRemote(parent, "w1", obj("a", token), inv, pending), "created with the token")
	assert.False(t, IsOursRemote(parent, "w1", obj("f", ""), inv, pending), "forged: the labels without the token")
	assert.False(t, IsOursRemote(parent, "w1", obj("f", "guess"), inv, pending), "forged: a token not the engine's")
	assert.NotContains(t, pending.Encode(), token, "the parent never shows the token")
	other := &unstructured.Unstructured{}
	other.SetUID("p-2")
	assert.NotEqual(t, token, CreateToken(other, key), "one token per parent and entry")

	seen := Proofs{key: Seen(obj("a", ""))}
	assert.True(t, IsOursRemote(parent, "w1", obj("a", ""), inv, seen), "the UID seen")
	assert.False(t, IsOursRemote(parent, "w1", obj("b", token), inv, seen), "another object at the name, even with the token")

	assert.True(t, IsOursRemote(parent, "w1", obj("a", ""), inv, nil), "no proofs: recorded by an engine that kept none")
	assert.True(t, IsOursRemote(parent, "w1", obj("a", ""), inv, Proofs{"w1:Namespace//acme": "uid:x"}), "an entry without proof: kept from a cluster that was down")
	assert.False(t, IsOursRemote(parent, "w1", obj("a", ""), Inventory{}, nil), "not in the inventory")

	bad := &unstructured.Unstructured{}
	bad.SetAnnotations(map[string]string{contract.AnnotationInventoryProofs: "{not json"})
	assert.False(t, IsOursRemote(parent, "w1", obj("a", ""), inv, ProofsOf(bad)), "unreadable proofs prove nothing")
	good := &unstructured.Unstructured{}
	good.SetAnnotations(map[string]string{contract.AnnotationInventoryProofs: seen.Encode()})
	assert.Equal(t, seen, ProofsOf(good))
}
