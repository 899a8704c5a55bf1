package clusters

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	k8stesting "k8s.io/client-go/testing"
)

// TestUnreadableRegistrationsAreSaid: when the engine may not list the
// cluster Secrets (its role lacks the rule), a cluster a template names
// is not "not registered" (it may well be): the error says the
// registrations cannot be read and why, and once they can, the message
// goes. A fake clientset refuses the list as the apiserver would.
func TestUnreadableRegistrationsAreSaid(t *testing.T) {
	cs := fake.NewClientset()
	var mu sync.Mutex
	refuse := true
	cs.PrependReactor("list", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if refuse {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "", errors.New(`User "system:serviceaccount:engine-system:engine" cannot list resource "secrets" in API group "" in the namespace "engine-system"`))
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	reg := New(Options{})
	done := make(chan error, 1)
	go func() { done <- reg.Run(ctx, Secrets{Client: fakeSecrets{cs}, Namespace: "engine-system"}) }()
	defer func() {
		cancel()
		require.NoError(t, <-done)
	}()

	var msg string
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, err := reg.Get("west")
		msg = err.Error()
		return reg.Unreadable() != "", nil
	}), "the refused list is never reported: %s", msg)
	_, err := reg.Get("west")
	var unknown *UnknownError
	require.ErrorAs(t, err, &unknown)
	assert.Contains(t, err.Error(), `cluster "west" is not known: the engine cannot read the cluster registrations: reading the cluster Secrets in namespace engine-system`)
	assert.Contains(t, err.Error(), "forbidden")

	mu.Lock()
	refuse = false
	mu.Unlock()
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return reg.Unreadable() == "", nil
	}), "the problem stays after the list is allowed")
	_, err = reg.Get("west")
	assert.EqualError(t, err, `cluster "west" is not registered (a Secret labelled engine.cuengine.dev/cluster=west in the engine's namespace registers it)`)
}

// fakeSecrets serves the Secrets of a fake clientset, and says, as the
// clientset does, that it does not serve watch-list.
type fakeSecrets struct{ *fake.Clientset }

func (f fakeSecrets) Secrets(ns string) corev1client.SecretInterface { return f.CoreV1().Secrets(ns) }
