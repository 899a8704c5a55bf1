package render

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var flipFlopGVK = schema.GroupVersionKind{Group: "test.cuengine.dev", Version: "v1", Kind: "FlipFlop"}

func object(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// TestOfflineDoesNotSettle: a template whose child changes with what it
// observes of itself never settles live; offline, after one rendering per
// given object and one more, it is an error that says so.
func TestOfflineDoesNotSettle(t *testing.T) {
	parent := object("test.cuengine.dev/v1", "FlipFlop", "default", "ff")
	given := Given{Live: []*unstructured.Unstructured{
		object("v1", "ConfigMap", "default", "a"),
		object("v1", "ConfigMap", "default", "b"),
	}}
	_, err := Offline(testTemplate(t, flipFlopGVK), parent, given, Options{})
	require.EqualError(t, err, "the template does not settle on the given objects: rendering 3 matched observed.config to ConfigMap default/a, "+
		"rendering 2 to ConfigMap default/b; live, its children would change at every reconcile")
}

// TestOfflineMatchesNamespace: a given object is matched to a child in
// its namespace, not to one of the same name elsewhere.
func TestOfflineMatchesNamespace(t *testing.T) {
	parent := object("test.cuengine.dev/v1", "FlipFlop", "default", "ff")
	given := Given{Live: []*unstructured.Unstructured{object("v1", "ConfigMap", "elsewhere", "a")}}
	out, err := Offline(testTemplate(t, flipFlopGVK), parent, given, Options{})
	require.NoError(t, err)
	require.Len(t, out.Children, 1)
	assert.Equal(t, "a", out.Children[0].GetName(), "observed.config absent: the object in another namespace is not the child")
}

// TestOfflineMissingMetadata: a parent from a file without a name fails
// to render for that reason, and the error names the field.
func TestOfflineMissingMetadata(t *testing.T) {
	parent := object("test.cuengine.dev/v1", "Tenant", "default", "")
	_, err := Offline(testTemplate(t, tenantGVK), parent, Given{}, Options{})
	var mm *MissingMetadataError
	require.True(t, errors.As(err, &mm), "%v", err)
	assert.Equal(t, []string{"name"}, mm.Fields)
}
