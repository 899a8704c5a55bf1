package render

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/cuengine/engine/contract"
)

// granted is obj with the grant annotation set to grant.
func granted(obj *unstructured.Unstructured, grant string) *unstructured.Unstructured {
	obj.SetAnnotations(map[string]string{contract.AnnotationAdoptBy: grant})
	return obj
}

// TestHolderOf: the object a new child's name holds is this parent's (by
// the same proof as IsOurs), granted to it (adopted), someone else's
// (named by its controller, if it has one, and never adopted then, grant or
// not), granted to another parent, or absent; a read that fails is an
// error.
func TestHolderOf(t *testing.T) {
	parent := testParent(tenantGVK, "acme", map[string]any{})
	other := testParent(tenantGVK, "globex", map[string]any{})
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		owned(parent, labelled(parent, testNamespace, "mine", "a")),
		owned(other, labelled(parent, testNamespace, "controlled", "b")),
		granted(owned(other, labelled(parent, testNamespace, "controlled-granted", "b")), "Tenant.test.cuengine.dev/ns/acme"),
		labelled(parent, testNamespace, "forged", "c"),
		granted(labelled(parent, testNamespace, "granted", "d"), "Tenant.test.cuengine.dev/ns/acme"),
		granted(labelled(parent, testNamespace, "granted-uid", "d"), " uid-acme\n"),
		granted(labelled(parent, testNamespace, "granted-other", "e"), "Tenant.test.cuengine.dev/ns/globex"),
		granted(labelled(parent, testNamespace, "granted-empty", "e"), ""),
	).Build()
	ctx := context.Background()

	for _, tc := range []struct {
		name, conflict string
		adopt, found   bool
	}{
		{name: "mine", found: true},
		{name: "controlled", found: true,
			conflict: "ConfigMap ns/controlled exists and is not controlled by this Tenant (controlled by Tenant globex); it is left untouched: an object another controller controls is never adopted"},
		{name: "controlled-granted", found: true,
			conflict: "ConfigMap ns/controlled-granted exists and is not controlled by this Tenant (controlled by Tenant globex); it is left untouched: an object another controller controls is never adopted"},
		{name: "forged", found: true,
			conflict: "ConfigMap ns/forged exists and is not controlled by this Tenant (not created by the engine for it); it is left untouched. " +
				"To hand it over to this Tenant, its owner runs: kubectl annotate configmap/forged -n ns engine.cuengine.dev/adopt-by=Tenant.test.cuengine.dev/ns/acme; " +
				"then engine reconcile tenant.test.cuengine.dev/acme -n ns adopts it"},
		{name: "granted", found: true, adopt: true},
		{name: "granted-uid", found: true, adopt: true},
		{name: "granted-other", found: true,
			conflict: "ConfigMap ns/granted-other exists and is not controlled by this Tenant (not created by the engine for it); it is left untouched: " +
				"its engine.cuengine.dev/adopt-by grant names \"Tenant.test.cuengine.dev/ns/globex\", not this Tenant (Tenant.test.cuengine.dev/ns/acme)"},
		{name: "granted-empty", found: true,
			conflict: "ConfigMap ns/granted-empty exists and is not controlled by this Tenant (not created by the engine for it); it is left untouched: " +
				"its engine.cuengine.dev/adopt-by grant names \"\", not this Tenant (Tenant.test.cuengine.dev/ns/acme)"},
		{name: "free"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := HolderOf(ctx, reader, parent, labelled(parent, testNamespace, tc.name, "x"))
			require.NoError(t, err)
			assert.Equal(t, tc.conflict, h.Conflict)
			assert.Equal(t, tc.adopt, h.Adopt)
			if !tc.found {
				assert.Nil(t, h.Live)
				return
			}
			require.NotNil(t, h.Live)
			assert.Equal(t, tc.name, h.Live.GetName())
		})
	}

	t.Run("a failed read", func(t *testing.T) {
		failing := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme).Build(), interceptor.Funcs{
			Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
				return errors.New("boom")
			},
		})
		_, err := HolderOf(ctx, failing, parent, labelled(parent, testNamespace, "any", "x"))
		assert.EqualError(t, err, "reading ConfigMap any: boom")
	})
}

// TestGrantCommand: the commands the conflict message gives name the
// object as kubectl takes it, its namespace when it has one, and the
// parent in the grant's format; then the parent as engine reconcile takes
// it.
func TestGrantCommand(t *testing.T) {
	parent := testParent(tenantGVK, "acme", map[string]any{})
	deploy := &unstructured.Unstructured{}
	deploy.SetAPIVersion("apps/v1")
	deploy.SetKind("Deployment")
	deploy.SetNamespace("web")
	deploy.SetName("site")
	assert.Equal(t, "kubectl annotate deployment.apps/site -n web engine.cuengine.dev/adopt-by=Tenant.test.cuengine.dev/ns/acme", GrantCommand(parent, deploy))
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName("team")
	assert.Equal(t, "kubectl annotate namespace/team engine.cuengine.dev/adopt-by=Tenant.test.cuengine.dev/ns/acme", GrantCommand(parent, ns))
	assert.Equal(t, "engine reconcile tenant.test.cuengine.dev/acme -n ns", ReconcileCommand(parent))
}
