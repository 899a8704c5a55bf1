package render

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestForeignOwner: the object a new child's name holds is this parent's
// (by the same proof as IsOurs), someone else's (named by its controller,
// if it has one), or absent; a read that fails is an error.
func TestForeignOwner(t *testing.T) {
	parent := testParent(tenantGVK, "acme", map[string]any{})
	other := testParent(tenantGVK, "globex", map[string]any{})
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		owned(parent, labelled(parent, testNamespace, "mine", "a")),
		owned(other, labelled(parent, testNamespace, "controlled", "b")),
		labelled(parent, testNamespace, "forged", "c"),
	).Build()
	ctx := context.Background()

	for _, tc := range []struct {
		name, owner string
		found       bool
	}{
		{"mine", "", true},
		{"controlled", "controlled by Tenant globex", true},
		{"forged", "not created by the engine for it", true},
		{"free", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live, owner, err := ForeignOwner(ctx, reader, parent, labelled(parent, testNamespace, tc.name, "x"))
			require.NoError(t, err)
			assert.Equal(t, tc.owner, owner)
			if !tc.found {
				assert.Nil(t, live)
				return
			}
			require.NotNil(t, live)
			assert.Equal(t, tc.name, live.GetName())
		})
	}

	t.Run("a failed read", func(t *testing.T) {
		failing := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme).Build(), interceptor.Funcs{
			Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
				return errors.New("boom")
			},
		})
		_, _, err := ForeignOwner(ctx, failing, parent, labelled(parent, testNamespace, "any", "x"))
		assert.EqualError(t, err, "reading ConfigMap any: boom")
	})
}
