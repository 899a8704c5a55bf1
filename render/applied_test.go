package render

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cuengine/engine/contract"
)

// TestAppliedHash: the hash depends on the object's content only, and
// WithAppliedHash annotates a copy, leaving the desired object as it was.
func TestAppliedHash(t *testing.T) {
	parent := testParent(tenantGVK, "acme", map[string]any{})
	a := labelled(parent, testNamespace, "a", "a")
	hash := AppliedHash(a)
	assert.Len(t, hash, 16)
	assert.Equal(t, hash, AppliedHash(a.DeepCopy()), "stable")
	b := a.DeepCopy()
	b.Object["data"] = map[string]any{"k": "v"}
	assert.NotEqual(t, hash, AppliedHash(b))

	sent := WithAppliedHash(a, hash)
	assert.Equal(t, hash, sent.GetAnnotations()[contract.AnnotationAppliedHash])
	assert.Empty(t, a.GetAnnotations(), "the desired object is not changed")
	assert.Equal(t, hash, AppliedHash(a))
}
