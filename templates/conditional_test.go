package templates

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestConditionalFieldSurvivesAdmission: a pvc volume's claimName, declared
// under `if type == "pvc"` as in KubeVela's webservice component, survives
// the CRD's pruning (Admit prunes and validates as the apiserver does) and
// reaches the child; before, the CRD had the default branch's fields only,
// and the parent failed with "parent.spec.volumes.0.claimName: incomplete
// value string".
func TestConditionalFieldSurvivesAdmission(t *testing.T) {
	dir := t.TempDir()
	writeTemplate(t, dir, "web.cue", `parameter: {
	image: string
	volumes?: [...{
		name:      string
		mountPath: string
		type:      *"emptyDir" | "pvc"
		if type == "pvc" {
			claimName: string
		}
	}]
}
parent: {apiVersion: "vela.cuengine.dev/v1", kind: "WebService", spec: parameter}
children: main: {
	apiVersion: "apps/v1"
	kind:       "Deployment"
	metadata: name: parent.metadata.name
	spec: {
		selector: matchLabels: app: parent.metadata.name
		template: {
			metadata: labels: app: parent.metadata.name
			spec: {
				containers: [{name: "main", image: parent.spec.image}]
				if parent.spec.volumes != _|_ {
					volumes: [for v in parent.spec.volumes if v.type == "pvc" {name: v.name, persistentVolumeClaim: claimName: v.claimName}]
				}
			}
		}
	}
}
`)
	tm := loadOne(t, dir)
	p := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "vela.cuengine.dev/v1", "kind": "WebService",
		"metadata": map[string]any{"name": "web", "namespace": "ns"},
		"spec":     map[string]any{"image": "nginx", "volumes": []any{map[string]any{"name": "data", "mountPath": "/data", "type": "pvc", "claimName": "data-claim"}}},
	}}
	stored, pruned, err := tm.Admit(p)
	require.NoError(t, err)
	assert.Empty(t, pruned, "nothing pruned")
	vols, _, _ := unstructured.NestedSlice(stored.Object, "spec", "volumes")
	require.Len(t, vols, 1)
	assert.Equal(t, "data-claim", vols[0].(map[string]any)["claimName"])
	res, err := tm.Evaluate(Input{Parent: stored})
	require.NoError(t, err)
	require.Len(t, res.Children, 1)
	claim, _, _ := unstructured.NestedSlice(res.Children[0].Object.Object, "spec", "template", "spec", "volumes")
	require.Len(t, claim, 1)
	assert.Equal(t, map[string]any{"name": "data", "persistentVolumeClaim": map[string]any{"claimName": "data-claim"}}, claim[0])
}
