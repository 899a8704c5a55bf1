package render

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
)

// Proofs are how the engine knows each child in a parent's inventory is
// the object it created (the parent's contract.AnnotationInventoryProofs),
// by inventory key: children that carry no owner reference, those in
// another namespace, cluster-scoped or in a workload cluster. Their labels
// can be copied by whoever may create objects there and read the parent;
// so an entry is
// proven by the object's UID once the engine has seen it, and until then
// by a token the engine creates it with, of which the parent records only
// the hash. An entry with no proof was recorded by an engine that kept
// none: its labels and the inventory prove it, as they did then.
type Proofs map[string]string

const (
	uidProof   = "uid:"
	tokenProof = "token:"
	// unreadable is the key, which no inventory entry has, that marks
	// proofs whose annotation did not parse.
	unreadable = ""
)

// ProofsOf reads the parent's proofs; nil when it has none. An annotation
// that does not parse proves nothing: every entry is then unproven by it,
// which is not the same as no proof at all (Proven).
func ProofsOf(parent *unstructured.Unstructured) Proofs {
	// Read in place: GetAnnotations copies every annotation, and this runs
	// on every reconcile.
	v, ok, _ := unstructured.NestedFieldNoCopy(parent.Object, "metadata", "annotations", contract.AnnotationInventoryProofs)
	raw, isString := v.(string)
	if !ok || !isString {
		return nil
	}
	p := Proofs{}
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		return Proofs{unreadable: "unreadable"}
	}
	delete(p, unreadable)
	return p
}

// Encode is the proofs as the parent's annotation stores them.
func (p Proofs) Encode() string {
	b, _ := json.Marshal(map[string]string(p)) // sorted keys
	return string(b)
}

// Proves reports whether obj is the object the entry key names: its UID
// is the one recorded, or it carries the token whose hash is recorded. An
// entry recorded without proof is proven (see Proofs); one whose parent's
// proofs do not parse is not.
func (p Proofs) Proves(key string, obj client.Object) bool {
	if p == nil {
		return true
	}
	proof, ok := p[key]
	if !ok {
		_, bad := p[unreadable]
		return !bad
	}
	switch {
	case strings.HasPrefix(proof, uidProof):
		return obj.GetUID() != "" && string(obj.GetUID()) == proof[len(uidProof):]
	case strings.HasPrefix(proof, tokenProof):
		token := obj.GetAnnotations()[contract.AnnotationCreateToken]
		return token != "" && hmac.Equal([]byte(pendingProof(token)), []byte(proof))
	}
	return false
}

// Seen is the proof of an object the engine has seen as its own.
func Seen(obj client.Object) string { return uidProof + string(obj.GetUID()) }

// Pending is the proof recorded for the entry key before the engine
// creates it: the hash of CreateToken.
func Pending(parent *unstructured.Unstructured, key string) string {
	return pendingProof(CreateToken(parent, key))
}

func pendingProof(token string) string {
	sum := sha256.Sum256([]byte(token))
	return tokenProof + hex.EncodeToString(sum[:])
}

// tokenKey is the engine process's secret for create tokens: a new one at
// every start. A token is needed only until the object's UID is recorded,
// and a restarted engine proves a pending create by the hash the parent
// holds, never by recomputing the token.
var tokenKey = func() []byte {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // never fails (crypto/rand)
	return key
}()

// CreateToken is the token the engine creates the entry key's object
// with (contract.AnnotationCreateToken): no one else can compute it, and
// the parent shows only its hash.
func CreateToken(parent *unstructured.Unstructured, key string) string {
	mac := hmac.New(sha256.New, tokenKey)
	mac.Write([]byte(string(parent.GetUID()) + "\x00" + key))
	return hex.EncodeToString(mac.Sum(nil))
}
