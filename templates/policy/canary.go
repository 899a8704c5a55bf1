package policy

import (
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cuengine/engine/contract"
)

// Canary is the rollout block's canary field: which parents a
// Progressive rollout moves first. It is the platform's choice, in the
// template: by default no parent is a canary (the first wave is taken in
// a stable order of the parents' UIDs), and a parent's own
// contract.LabelCanary, which whoever writes the parent can set, counts
// only where ObjectLabel allows it.
type Canary struct {
	// Namespaces: every parent in one of these namespaces is a canary.
	Namespaces []string
	// ObjectLabel: a parent labelled engine.cuengine.dev/canary=true is a
	// canary too.
	ObjectLabel bool
}

// decodeCanary reads rollout.canary: {namespaces: [...], objectLabel: bool}.
func decodeCanary(x any) (Canary, error) {
	bad := func(msg string, args ...any) error {
		return &FieldError{"rollout", "canary", fmt.Sprintf(msg, args...)}
	}
	if x == nil {
		return Canary{}, nil
	}
	m, ok := x.(map[string]any)
	if !ok {
		return Canary{}, bad("must be a struct such as {namespaces: [\"canary\"]}, not %v", x)
	}
	var c Canary
	for _, field := range slices.Sorted(maps.Keys(m)) {
		v := m[field]
		switch field {
		case "namespaces":
			items, ok := v.([]any)
			if !ok {
				return Canary{}, bad("namespaces must be a list of namespace names, not %v", v)
			}
			for _, item := range items {
				name, ok := item.(string)
				if !ok || len(validation.IsDNS1123Label(name)) > 0 {
					return Canary{}, bad("namespaces: %q is not a namespace name", fmt.Sprint(item))
				}
				c.Namespaces = append(c.Namespaces, name)
			}
		case "objectLabel":
			b, ok := v.(bool)
			if !ok {
				return Canary{}, bad("objectLabel must be true or false, not %v", v)
			}
			c.ObjectLabel = b
		default:
			return Canary{}, bad("unknown field %q (namespaces, objectLabel)", field)
		}
	}
	return c, nil
}

// Includes reports whether a parent in namespace with labels is a canary.
func (c Canary) Includes(namespace string, labels map[string]string) bool {
	return slices.Contains(c.Namespaces, namespace) || (c.ObjectLabel && labels[contract.LabelCanary] == "true")
}
