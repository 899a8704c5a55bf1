package diff

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// hideSecretValues replaces a connection Secret's values by their keys:
// a diff shows that such a Secret goes, never what it held.
func hideSecretValues(c *unstructured.Unstructured) {
	for _, field := range []string{"data", "stringData"} {
		m, ok := c.Object[field].(map[string]any)
		if !ok {
			continue
		}
		hidden := make(map[string]any, len(m))
		for k := range m {
			hidden[k] = "(hidden)"
		}
		c.Object[field] = hidden
	}
}
