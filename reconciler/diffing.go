package reconciler

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// What `engine diff` (the engine's diff.go) shares with the apply step, so
// that it shows what a reconcile would do: who controls an object a child
// would replace, and the applied hash a write carries (apply.go).

// ForeignOwner is foreignOwner, for engine diff.
func ForeignOwner(ctx context.Context, reader client.Reader, parent, desired *unstructured.Unstructured) (*unstructured.Unstructured, string, error) {
	return foreignOwner(ctx, reader, parent, desired)
}

// AppliedHash is appliedHash, for engine diff.
func AppliedHash(obj *unstructured.Unstructured) string { return appliedHash(obj) }

// WithAppliedHash is withAppliedHash, for engine diff.
func WithAppliedHash(desired *unstructured.Unstructured, hash string) *unstructured.Unstructured {
	return withAppliedHash(desired, hash)
}
