package engine

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cuengine/engine/templates"
)

// TestUnitRefIndex: an object maps to the parents that reference it by
// name, or by a selector of its namespace it matches; tracking a parent
// again replaces what it references, and nil forgets it.
func TestUnitRefIndex(t *testing.T) {
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	svc := schema.GroupVersionKind{Version: "v1", Kind: "Service"}
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	obj := func(ns, name string, labels map[string]string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetNamespace(ns)
		u.SetName(name)
		u.SetLabels(labels)
		return u
	}
	parents := func(x *refIndex, gvk schema.GroupVersionKind, o *unstructured.Unstructured) []string {
		var out []string
		for _, p := range x.parents(gvk, o) {
			out = append(out, p.String())
		}
		slices.Sort(out)
		return out
	}
	x := newRefIndex()
	x.track(a, []templates.Reference{
		{Name: "s", GVK: cm, Namespace: "ns", ObjectName: "settings"},
		{Name: "p", GVK: svc, Namespace: "ns", Selector: map[string]string{"team": "x"}},
	})
	x.track(b, []templates.Reference{{Name: "s", GVK: cm, Namespace: "ns", ObjectName: "settings"}})

	assert.Equal(t, []string{"ns/a", "ns/b"}, parents(x, cm, obj("ns", "settings", nil)))
	assert.Empty(t, parents(x, cm, obj("other", "settings", nil)), "another namespace")
	assert.Empty(t, parents(x, svc, obj("ns", "settings", nil)), "another kind")
	assert.Equal(t, []string{"ns/a"}, parents(x, svc, obj("ns", "web", map[string]string{"team": "x", "tier": "1"})))
	assert.Empty(t, parents(x, svc, obj("ns", "web", map[string]string{"team": "y"})))

	x.track(a, []templates.Reference{{Name: "s", GVK: cm, Namespace: "ns", ObjectName: "other"}})
	assert.Equal(t, []string{"ns/b"}, parents(x, cm, obj("ns", "settings", nil)))
	assert.Equal(t, []string{"ns/a"}, parents(x, cm, obj("ns", "other", nil)))
	assert.Empty(t, parents(x, svc, obj("ns", "web", map[string]string{"team": "x"})), "the selector is gone with the retrack")

	x.track(a, nil)
	x.track(b, nil)
	assert.Empty(t, x.byParent)
	assert.Empty(t, x.byObject)
	assert.Empty(t, x.bySelector, "nothing left behind")
}
