package templates

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestResourceDocument: a resource's document has its provider, spec and
// deletionPolicy always, dependsOn and connectionSecret only when set.
func TestResourceDocument(t *testing.T) {
	spec := map[string]any{"bucketName": "b"}
	assert.Equal(t, map[string]any{"provider": "gcs", "spec": spec, "deletionPolicy": "Delete"},
		Resource{Name: "r", Provider: "gcs", Spec: spec, DeletionPolicy: DeletionPolicyDelete}.Document())
	assert.Equal(t, map[string]any{"provider": "gcs", "spec": spec, "deletionPolicy": "Orphan", "dependsOn": []string{"a", "b"}, "connectionSecret": map[string]any{"name": "s"}},
		Resource{Name: "r", Provider: "gcs", Spec: spec, DeletionPolicy: DeletionPolicyOrphan, DependsOn: []string{"a", "b"}, ConnectionSecret: "s"}.Document())
}
