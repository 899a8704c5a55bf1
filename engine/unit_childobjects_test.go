package engine

import (
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/render"
)

var (
	configMapGVK  = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	deploymentGVK = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	unitWebsite   = schema.GroupVersionKind{Group: "test.cuengine.dev", Version: "v1", Kind: "Website"}
)

// TestChildObjects: the kinds client-go's scheme knows are held typed,
// the others unstructured; listed items get their kind, and a typed one
// reads as the same unstructured object as its JSON does.
func TestChildObjects(t *testing.T) {
	objects := childObjects{scheme: scheme.Scheme}
	assert.IsType(t, &appsv1.Deployment{}, objects.object(deploymentGVK))
	assert.IsType(t, &corev1.ConfigMap{}, objects.object(configMapGVK))
	assert.IsType(t, &appsv1.DeploymentList{}, objects.list(deploymentGVK))
	site := objects.object(unitWebsite)
	require.IsType(t, &unstructured.Unstructured{}, site)
	assert.Equal(t, unitWebsite, site.GetObjectKind().GroupVersionKind())
	assert.Equal(t, unitWebsite.GroupVersion().WithKind("WebsiteList"), objects.list(unitWebsite).GetObjectKind().GroupVersionKind())
	assert.IsType(t, &unstructured.Unstructured{}, childObjects{}.object(deploymentGVK), "no scheme: everything unstructured")

	three := int32(3)
	surge := intstr.FromString("25%")
	list := &appsv1.DeploymentList{Items: []appsv1.Deployment{{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Labels: map[string]string{contract.LabelChild: "deployment"},
			CreationTimestamp: metav1.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		Spec: appsv1.DeploymentSpec{Replicas: &three,
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: &surge}},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}}}},
		Status: appsv1.DeploymentStatus{ReadyReplicas: 2},
	}}}
	items, err := objects.items(deploymentGVK, list)
	require.NoError(t, err)
	require.Len(t, items, 1)
	assert.Same(t, &list.Items[0], items[0], "the list's own item, not a copy")
	assert.Equal(t, deploymentGVK, items[0].GetObjectKind().GroupVersionKind())

	read := func(obj client.Object) (*unstructured.Unstructured, error) {
		live, err := render.OwnedChildren{obj}.Read()
		if err != nil {
			return nil, err
		}
		return live.List()[0], nil
	}
	u, err := read(items[0])
	require.NoError(t, err)
	assert.Equal(t, "apps/v1", u.GetAPIVersion())
	assert.Equal(t, "Deployment", u.GetKind())
	assert.Equal(t, "deployment", u.GetLabels()[contract.LabelChild])
	ready, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
	assert.Equal(t, int64(2), ready, "numbers as int64, as from JSON")
	b, err := json.Marshal(items[0])
	require.NoError(t, err)
	fromJSON := &unstructured.Unstructured{}
	require.NoError(t, fromJSON.UnmarshalJSON(b))
	assert.Equal(t, fromJSON.Object, u.Object)

	same := &unstructured.Unstructured{}
	same.SetGroupVersionKind(unitWebsite)
	got, err := read(same)
	require.NoError(t, err)
	assert.Same(t, same, got, "an unstructured child is read as it is")
}

// TestTypesKnowAllFields: built-in kinds are cached typed only on an
// apiserver no newer than the engine's API types.
func TestTypesKnowAllFields(t *testing.T) {
	for _, tc := range []struct {
		major, minor string
		want         bool
	}{
		{"1", strconv.Itoa(apiTypesMinor), true},
		{"1", strconv.Itoa(apiTypesMinor) + "+", true},
		{"1", "30", true},
		{"1", strconv.Itoa(apiTypesMinor + 1), false},
		{"1", strconv.Itoa(apiTypesMinor+1) + "+", false},
		{"2", "0", false},
		{"1", "", false},
	} {
		assert.Equal(t, tc.want, typesKnowAllFields(&version.Info{Major: tc.major, Minor: tc.minor}), "%s.%s", tc.major, tc.minor)
	}
}

// TestAPITypesMinorMatchesGoMod: apiTypesMinor follows k8s.io/api in
// go.mod (v0.X.Y is Kubernetes 1.X).
func TestAPITypesMinorMatchesGoMod(t *testing.T) {
	b, err := os.ReadFile("../go.mod")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^\s*k8s\.io/api v0\.(\d+)\.`).FindSubmatch(b)
	require.NotNil(t, m, "k8s.io/api in go.mod")
	assert.Equal(t, string(m[1]), strconv.Itoa(apiTypesMinor), "update apiTypesMinor with k8s.io/api")
}
