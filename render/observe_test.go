package render

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates"
)

// failingReader fails every read.
type failingReader struct{}

func (failingReader) Read(context.Context, templates.Reference) ([]*unstructured.Unstructured, error) {
	return nil, errors.New("connection refused")
}

// TestObserve: the one door for what a template sees. The references'
// views go over live, which is left as it is; each matched object is in
// Versions; the placed references are told before any read, nil when
// they cannot be placed; every missing reference is in one error, which
// counts the parent's children; a read that fails names the reference;
// a reference Given.ByName gives is not read.
func TestObserve(t *testing.T) {
	cm := func(name, rv string, data map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": "a", "resourceVersion": rv}, "data": data}}
	}
	tpl := referenceTemplate(t, "", `references: {
	s: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "s"}
	t: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "t"}
}`)
	ctx := context.Background()
	s, tt := cm("s", "7", map[string]any{"k": "v"}), cm("t", "9", nil)

	t.Run("merged over live", func(t *testing.T) {
		live := map[string]any{"child": "content", "s": "stale"}
		var placed []string
		obs, err := Observe(ctx, tpl, reader("a"), live, Given{Live: []*unstructured.Unstructured{s, tt}}, ObserveOptions{
			Placed: func(refs []templates.Reference) {
				for _, r := range refs {
					placed = append(placed, r.String())
				}
			},
		})
		require.NoError(t, err)
		assert.Equal(t, []string{"ConfigMap a/s", "ConfigMap a/t"}, placed)
		assert.Equal(t, map[string]any{"child": "content", "s": s.Object, "t": tt.Object}, obs.Observed)
		assert.Equal(t, map[string]any{"child": "content", "s": "stale"}, live, "live is not modified")
		assert.Equal(t, []string{"s=/v1, Kind=ConfigMap/a/s/7", "t=/v1, Kind=ConfigMap/a/t/9"}, obs.Versions)
		assert.Equal(t, map[string]any{"child": "other", "s": s.Object, "t": tt.Object}, obs.With(map[string]any{"child": "other"}))
	})

	t.Run("given by name", func(t *testing.T) {
		obs, err := Observe(ctx, tpl, reader("a"), nil, Given{Live: []*unstructured.Unstructured{s}, ByName: map[string]any{"t": "given"}}, ObserveOptions{})
		require.NoError(t, err)
		assert.Equal(t, map[string]any{"s": s.Object, "t": "given"}, obs.Observed)
	})

	t.Run("missing", func(t *testing.T) {
		_, err := Observe(ctx, tpl, reader("a"), nil, Given{}, ObserveOptions{Children: 2})
		var missing *MissingReferencesError
		require.ErrorAs(t, err, &missing)
		assert.EqualError(t, err, "referenced ConfigMap a/s (references.s), ConfigMap a/t (references.t) not found: the 2 existing children are kept as they are, nothing is created, updated or deleted until it exists again")
	})

	t.Run("a read fails", func(t *testing.T) {
		_, err := Observe(ctx, tpl, reader("a"), nil, failingReader{}, ObserveOptions{})
		var read *ReadReferenceError
		require.ErrorAs(t, err, &read)
		assert.EqualError(t, err, "reading reference s: connection refused")
	})

	t.Run("refused", func(t *testing.T) {
		elsewhere := referenceTemplate(t, "", `references: s: {apiVersion: "v1", kind: "ConfigMap", metadata: {name: "s", namespace: "b"}}`)
		placed := []templates.Reference{{Name: "before"}}
		_, err := Observe(ctx, elsewhere, reader("a"), nil, Given{}, ObserveOptions{Placed: func(refs []templates.Reference) { placed = refs }})
		var re *Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, contract.ReasonReferenceRefused, re.Reason)
		assert.Nil(t, placed, "told that nothing is placed")
	})
}
