package engine

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cuengine/engine/templates"
)

// TestRefIndex: references reaching the same objects share a key; a
// key maps to the parents holding it, of any kind; tracking a parent again
// replaces what it holds and returns the keys nobody holds any more, and
// so does releasing a kind.
func TestRefIndex(t *testing.T) {
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	svc := schema.GroupVersionKind{Version: "v1", Kind: "Service"}
	k1, k2 := &kindController{}, &kindController{}
	a := refHolder{k1, types.NamespacedName{Namespace: "ns", Name: "a"}}
	b := refHolder{k1, types.NamespacedName{Namespace: "ns", Name: "b"}}
	c := refHolder{k2, types.NamespacedName{Namespace: "ns", Name: "a"}}
	settings := keyOf(templates.Reference{Name: "s", GVK: cm, Namespace: "ns", ObjectName: "settings"})
	team := keyOf(templates.Reference{Name: "p", GVK: svc, Namespace: "ns", Selector: map[string]string{"team": "x", "tier": "1"}})
	assert.Equal(t, team, keyOf(templates.Reference{Name: "other", GVK: svc, Namespace: "ns", Selector: map[string]string{"tier": "1", "team": "x"}}),
		"the same selector under another local name")
	assert.NotEqual(t, settings, keyOf(templates.Reference{GVK: cm, Namespace: "other", ObjectName: "settings"}), "another namespace")
	assert.NotEqual(t, settings, keyOf(templates.Reference{GVK: svc, Namespace: "ns", ObjectName: "settings"}), "another kind")
	assert.Equal(t, "ConfigMap ns/settings", settings.String())
	assert.Equal(t, "Service ns with labels team=x,tier=1", team.String())

	holders := func(x *refIndex, k refKey) []string {
		var out []string
		for _, h := range x.holders(k) {
			who := "k1:"
			if h.kc == k2 {
				who = "k2:"
			}
			out = append(out, who+h.parent.String())
		}
		slices.Sort(out)
		return out
	}
	x := newRefIndex()
	assert.Empty(t, x.track(a, []refKey{settings, team}))
	assert.Empty(t, x.track(b, []refKey{settings}))
	assert.Empty(t, x.track(c, []refKey{team}))
	assert.Equal(t, []string{"k1:ns/a", "k1:ns/b"}, holders(x, settings))
	assert.Equal(t, []string{"k1:ns/a", "k2:ns/a"}, holders(x, team), "parents of two kinds, one key")

	other := keyOf(templates.Reference{GVK: cm, Namespace: "ns", ObjectName: "other"})
	assert.Empty(t, x.track(a, []refKey{other}), "settings and team are still held by b and c")
	assert.Equal(t, []string{"k1:ns/b"}, holders(x, settings))
	assert.Equal(t, []string{"k2:ns/a"}, holders(x, team))
	assert.Equal(t, []refKey{team}, x.track(c, nil))
	assert.False(t, x.held(team))

	released := x.releaseKind(k1)
	slices.SortFunc(released, func(p, q refKey) int { return strings.Compare(p.String(), q.String()) })
	assert.Equal(t, []refKey{other, settings}, released)
	assert.Empty(t, x.byHolder)
	assert.Empty(t, x.byKey, "nothing left behind")
}
