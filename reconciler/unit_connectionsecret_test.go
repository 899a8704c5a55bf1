package reconciler

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/contract"
)

func vaultRecord() resourceRecord {
	return resourceRecord{Name: "db", Provider: "fake", ExternalName: "db-0", Settings: map[string]string{"zone": "test"}, DeletionPolicy: "Delete"}
}

// secretData decodes a Secret's data as the fake apiserver stores it.
func secretData(t *testing.T, s *unstructured.Unstructured) map[string]string {
	t.Helper()
	require.NotNil(t, s)
	sec := &corev1.Secret{}
	b, err := json.Marshal(s.Object)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, sec))
	out := map[string]string{}
	for k, v := range sec.Data {
		out[k] = string(v)
	}
	return out
}

// TestUnitConnectionSecret: the provider's sensitive outputs land in a
// Secret child owned by the parent, and nowhere else; the Secret is not
// what the template observes; a resync keeps the token the provider gave
// once; a Secret deleted out of band makes the engine ask for a new one.
func TestUnitConnectionSecret(t *testing.T) {
	vault := withRecords(t, unitParent(unitVault, "vault", map[string]any{}), vaultRecord())
	e := newUnitEnv(t, unitVault, vault)

	e.reconcileClean(vault)
	assert.Equal(t, []string{"apply db-0 reset"}, e.provider.takeCalls(), "no Secret yet: the credentials are asked for")
	sec := e.get(secretGVK, unitNamespace, "vault-conn")
	assert.Equal(t, map[string]string{"endpoint": "fake://db-0", "token": "tok-1"}, secretData(t, sec))
	assert.Equal(t, "db.connection", sec.GetLabels()[contract.LabelChild])
	assert.Equal(t, "db", sec.GetAnnotations()[contract.AnnotationConnectionSecretOf])
	require.Len(t, sec.GetOwnerReferences(), 1)
	assert.Equal(t, vault.GetUID(), sec.GetOwnerReferences()[0].UID)

	e.reconcileClean(vault)
	assert.Equal(t, []string{"apply db-0"}, e.provider.takeCalls(), "the Secret exists: no reset")
	assert.Equal(t, map[string]string{"endpoint": "fake://db-0", "token": "tok-1"}, secretData(t, e.get(secretGVK, unitNamespace, "vault-conn")),
		"the token the provider gave once is kept")
	cur := e.reread(vault)
	status, _ := json.Marshal(cur.Object)
	assert.NotContains(t, string(status), "tok-1")
	assert.Equal(t, false, cur.Object["status"].(map[string]any)["sawSecret"], "the template never observes the Secret")
	for _, ev := range e.events.take() {
		assert.NotContains(t, ev.Message, "tok-")
	}

	require.NoError(t, e.store.Delete(e.ctx, sec))
	e.reconcileClean(vault)
	assert.Equal(t, []string{"apply db-0 reset"}, e.provider.takeCalls(), "the Secret was lost: new credentials")
	assert.Equal(t, map[string]string{"endpoint": "fake://db-0", "token": "tok-2"}, secretData(t, e.get(secretGVK, unitNamespace, "vault-conn")))

	// The field dropped: the Secret is pruned like any child.
	vault = e.reread(vault)
	require.NoError(t, unstructured.SetNestedField(vault.Object, "", "spec", "secret"))
	e.update(vault)
	e.reconcileClean(vault)
	assert.Equal(t, []string{"apply db-0"}, e.provider.takeCalls())
	assert.Nil(t, e.get(secretGVK, unitNamespace, "vault-conn"))
}

// TestUnitConnectionSecretKeptWhenTheProviderFails: a failing Apply leaves
// the Secret as it is, rather than pruning the only copy of a password.
func TestUnitConnectionSecretKeptWhenTheProviderFails(t *testing.T) {
	vault := withRecords(t, unitParent(unitVault, "vault", map[string]any{}), vaultRecord())
	e := newUnitEnv(t, unitVault, vault)
	e.reconcileClean(vault)
	e.provider.takeCalls()
	e.provider.failing("apply db-0", assert.AnError)
	_, err := e.reconcile(vault)
	require.Error(t, err)
	assert.Equal(t, map[string]string{"endpoint": "fake://db-0", "token": "tok-1"}, secretData(t, e.get(secretGVK, unitNamespace, "vault-conn")))
}
