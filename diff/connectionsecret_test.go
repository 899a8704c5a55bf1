package diff

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/contract"
)

func TestConnectionSecretValuesAreHidden(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"data": map[string]any{"password": "czNjcjN0", "username": "YXBw"},
	}}
	u.SetName("app-db")
	u.SetAnnotations(map[string]string{contract.AnnotationConnectionSecretOf: "db"})
	out := clean(u)
	assert.NotContains(t, out, "czNjcjN0")
	assert.NotContains(t, out, "YXBw")
	assert.Contains(t, out, "password: (hidden)")
	assert.Equal(t, "czNjcjN0", u.Object["data"].(map[string]any)["password"], "the live object is not changed")
}
