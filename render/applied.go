package render

import (
	"crypto/sha256"
	"encoding/hex"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/internal/jsonhash"
)

// AppliedHash identifies a desired object, so an unchanged one is not
// applied again: the value of its contract.AnnotationAppliedHash. The
// values of its CreateOnly paths are left out (leftfields.go): a change of
// them is no reason to apply.
func AppliedHash(obj *unstructured.Unstructured) string {
	// The hash of its JSON (map keys sorted: stable), streamed; the bytes
	// are json.Marshal's, so hashes already on objects still match.
	sum, err := jsonhash.Sum(withoutCreateOnly(obj).Object)
	if err != nil {
		sum = sha256.Sum256(nil) // as the hash of the JSON that failed
	}
	return hex.EncodeToString(sum[:8])
}

// WithAppliedHash returns a copy of the desired child to send, annotated
// with its applied hash: what the engine applies, and what engine diff
// dry-runs. Only a write pays for the copy (the apply sets what it
// replies on it); a child already as desired costs none.
func WithAppliedHash(desired *unstructured.Unstructured, hash string) *unstructured.Unstructured {
	obj := desired.DeepCopy()
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[contract.AnnotationAppliedHash] = hash
	obj.SetAnnotations(a)
	return obj
}
