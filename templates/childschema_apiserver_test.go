package templates

import (
	"context"
	"encoding/json"
	"testing"

	"cuelang.org/go/cue/cuecontext"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/cuengine/engine/internal/localcluster"

	"github.com/cuengine/engine/templates/openapi"
)

// TestChildSchemasAgreeWithTheAPIServer applies the children of
// TestChildSchemasNull and TestChildSchemasCRDRoot to a real kube-apiserver
// (server-side apply, as the engine writes children, dry run): it takes
// exactly those that the check lets through.
func TestChildSchemasAgreeWithTheAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane (run without -short)")
	}
	crds, err := openapi.ReadCRDs(nullCRDs)
	require.NoError(t, err)
	cluster, err := localcluster.Start(context.Background(), localcluster.Options{CRDs: crds})
	require.NoError(t, err, "the control plane is built by `make assets`")
	t.Cleanup(func() { assert.NoError(t, cluster.Stop()) })
	dyn, err := dynamic.NewForConfig(cluster.Config)
	require.NoError(t, err)
	resources := map[string]schema.GroupVersionResource{
		"NetworkPolicy": {Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"},
		"Knob":          {Group: "tools.example.org", Version: "v1", Resource: "knobs"},
		"Wheel":         {Group: "tools.example.org", Version: "v1", Resource: "wheels"},
	}
	type tc = struct{ name, child, want string }
	var cases []tc
	for _, c := range nullCases {
		cases = append(cases, tc{c.name, c.child, c.want})
	}
	for _, c := range crdRootCases {
		cases = append(cases, tc{c.name, c.child, c.want})
	}
	ctx := cuecontext.New()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := ctx.CompileString(c.child).MarshalJSON()
			require.NoError(t, err)
			u := &unstructured.Unstructured{}
			require.NoError(t, json.Unmarshal(b, &u.Object))
			_, err = dyn.Resource(resources[u.GetKind()]).Namespace("default").Apply(context.Background(), u.GetName(), u,
				metav1.ApplyOptions{FieldManager: "test", Force: true, DryRun: []string{metav1.DryRunAll}})
			if c.want == "" {
				assert.NoError(t, err, "vet takes it")
			} else {
				assert.Error(t, err, "vet refuses it: %s", c.want)
			}
		})
	}
}
