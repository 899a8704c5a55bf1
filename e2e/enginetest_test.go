package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// TestEngineTestMatchesRun checks that what `engine test` compares a case
// with (the golden file of examples/templates/tests/mykind/ready) is what
// `engine run` applies for the same parent: the Deployment fields the
// template sets, server-side defaults aside.
func TestEngineTestMatchesRun(t *testing.T) {
	dir := templatesDir(t, "examples/templates/mykind.cue")
	installCRDs(t, dir)
	startEngine(t, dir)
	ns := namespace(t)
	ctx := context.Background()
	caseDir := filepath.Join(repo, "examples/templates/tests/mykind/ready")

	kubectl(t, "-n", ns, "apply", "-f", filepath.Join(caseDir, "parent.yaml"))
	want, err := os.ReadFile(filepath.Join(caseDir, "want.yaml"))
	require.NoError(t, err)
	var rendered unstructured.Unstructured
	js, err := yaml.YAMLToJSON([]byte(strings.Split(string(want), "\n---\n")[0]))
	require.NoError(t, err)
	require.NoError(t, utiljson.Unmarshal(js, &rendered.Object), "whole numbers as int64, as the apiserver's")
	require.Equal(t, "Deployment", rendered.GetKind())

	eventually(t, "Deployment "+rendered.GetName(), 30*time.Second, func(ctx context.Context) (bool, error) {
		_, err := kube.AppsV1().Deployments(ns).Get(ctx, rendered.GetName(), metav1.GetOptions{})
		return err == nil, err
	})
	live, err := dyn.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}).Namespace(ns).Get(ctx, rendered.GetName(), metav1.GetOptions{})
	require.NoError(t, err)

	for _, path := range [][]string{
		{"spec", "replicas"},
		{"spec", "selector"},
		{"spec", "template", "metadata", "labels"},
	} {
		w, _, _ := unstructured.NestedFieldNoCopy(rendered.Object, path...)
		l, _, _ := unstructured.NestedFieldNoCopy(live.Object, path...)
		assert.Equal(t, w, l, strings.Join(path, "."))
	}
	wc, _, _ := unstructured.NestedSlice(rendered.Object, "spec", "template", "spec", "containers")
	lc, _, _ := unstructured.NestedSlice(live.Object, "spec", "template", "spec", "containers")
	require.Len(t, lc, len(wc))
	for i := range wc {
		for k, v := range wc[i].(map[string]any) {
			assert.Equal(t, v, lc[i].(map[string]any)[k], "container %d: %s", i, k)
		}
	}
	for k, v := range rendered.GetLabels() {
		assert.Equal(t, v, live.GetLabels()[k], "label %s", k)
	}
	assert.Equal(t, "MyKind.webapp.my.domain/"+ns+"/mykind-sample", live.GetAnnotations()["engine.cuengine.dev/parent"],
		"the same annotation as rendered, in the parent's namespace")
}
