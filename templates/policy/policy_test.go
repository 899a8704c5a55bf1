package policy

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestPolicyWithin: an older revision's rights, bounded by the newest
// template's policy.
func TestPolicyWithin(t *testing.T) {
	all := Namespaces{All: true}
	shared := Namespaces{Names: []string{"shared"}}
	for _, tt := range []struct {
		name     string
		p, bound Policy
		want     Policy
	}{
		{"narrowed to a list", Policy{CrossNamespace: all, ClusterScoped: true}, Policy{CrossNamespace: shared}, Policy{CrossNamespace: shared}},
		{"narrowed to none", Policy{CrossNamespace: all}, Policy{}, Policy{}},
		{"not widened", Policy{}, Policy{CrossNamespace: all, ClusterScoped: true}, Policy{}},
		{"lists intersect", Policy{CrossNamespace: Namespaces{Names: []string{"a", "shared"}}}, Policy{CrossNamespace: Namespaces{Names: []string{"shared", "b"}}}, Policy{CrossNamespace: shared}},
		{"same", Policy{CrossNamespace: shared, ClusterScoped: true}, Policy{CrossNamespace: shared, ClusterScoped: true}, Policy{CrossNamespace: shared, ClusterScoped: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.p.Within(tt.bound))
		})
	}
}
