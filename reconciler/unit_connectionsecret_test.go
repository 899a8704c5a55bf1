package reconciler

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// TestConnectionSecret: the provider's sensitive outputs land in a
// Secret child owned by the parent, and nowhere else; the Secret is not
// what the template observes; a resync keeps the token the provider gave
// once; a Secret deleted out of band makes the engine ask for a new one.
func TestConnectionSecret(t *testing.T) {
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

// TestConnectionSecretKeptWhenTheProviderFails: a failing Apply leaves
// the Secret as it is, rather than pruning the only copy of a password.
func TestConnectionSecretKeptWhenTheProviderFails(t *testing.T) {
	vault := withRecords(t, unitParent(unitVault, "vault", map[string]any{}), vaultRecord())
	e := newUnitEnv(t, unitVault, vault)
	e.reconcileClean(vault)
	e.provider.takeCalls()
	e.provider.failing("apply db-0", assert.AnError)
	_, err := e.reconcile(vault)
	require.Error(t, err)
	assert.Equal(t, map[string]string{"endpoint": "fake://db-0", "token": "tok-1"}, secretData(t, e.get(secretGVK, unitNamespace, "vault-conn")))
}

// editSecretData changes a Secret's data as kubectl edit would: the keys
// in set take those values, the keys in remove go.
func (e *unitEnv) editSecretData(namespace, name string, set map[string]string, remove ...string) {
	e.t.Helper()
	sec := e.get(secretGVK, namespace, name)
	require.NotNil(e.t, sec)
	data, _, _ := unstructured.NestedMap(sec.Object, "data")
	for k, v := range set {
		data[k] = base64.StdEncoding.EncodeToString([]byte(v))
	}
	for _, k := range remove {
		delete(data, k)
	}
	require.NoError(e.t, unstructured.SetNestedMap(sec.Object, data, "data"))
	e.update(sec)
}

// TestConnectionSecretDrift: a connection Secret changed by someone
// else is put right. A key the provider gives on every call is restored;
// a key it gives only with new credentials (the token), changed or
// removed, makes the engine reset them. Meanwhile the parent is not Ready
// (Synced=False ConnectionSecretDrifted, with an event naming the keys,
// never a value); keys added by others stay.
func TestConnectionSecretDrift(t *testing.T) {
	vault := withRecords(t, unitParent(unitVault, "vault", map[string]any{}), vaultRecord())
	e := newUnitEnv(t, unitVault, vault)
	e.reconcileClean(vault)
	e.reconcileClean(vault)
	e.provider.takeCalls()
	e.events.take()
	sec := e.get(secretGVK, unitNamespace, "vault-conn")
	sums := sec.GetAnnotations()[contract.AnnotationConnectionSecretSums]
	assert.NotEmpty(t, sums)
	assert.NotContains(t, sums, "tok-1")

	drifted := func(keys, repair string) {
		t.Helper()
		_, _ = e.reconcile(vault) // a problem, retried soon
		c := e.condition(vault, contract.ConditionSynced)
		require.NotNil(t, c)
		assert.Equal(t, contract.ReasonConnectionSecretDrifted, c.Reason)
		assert.Equal(t, "resource db: connection Secret vault-conn: "+keys+" changed by someone else; "+repair, c.Message)
		assert.Equal(t, metav1.ConditionFalse, e.condition(vault, contract.ConditionReady).Status)
		evs := e.events.take()
		assert.True(t, slices.ContainsFunc(evs, func(ev unitEvent) bool {
			return ev.Type == corev1.EventTypeWarning && ev.Reason == contract.ReasonConnectionSecretDrifted && strings.HasPrefix(ev.Message, c.Message)
		}), "a Warning event says why: %v", evs)
		for _, ev := range evs {
			assert.NotContains(t, ev.Message, "tok-")
			assert.NotContains(t, ev.Message, "stolen")
		}
	}
	clean := func() {
		t.Helper()
		e.reconcileClean(vault)
		assert.Equal(t, metav1.ConditionTrue, e.condition(vault, contract.ConditionSynced).Status)
		assert.Equal(t, []string{"apply db-0"}, e.provider.takeCalls(), "put right: no further reset")
		e.events.take()
	}

	// Someone adds a key: left alone, no drift.
	e.editSecretData(unitNamespace, "vault-conn", map[string]string{"note": "mine"})
	clean()
	assert.Equal(t, map[string]string{"endpoint": "fake://db-0", "token": "tok-1", "note": "mine"}, secretData(t, e.get(secretGVK, unitNamespace, "vault-conn")))

	// The endpoint edited: restored from the provider, no new token.
	e.editSecretData(unitNamespace, "vault-conn", map[string]string{"endpoint": "fake://elsewhere"})
	drifted("key endpoint", "restored")
	assert.Equal(t, []string{"apply db-0"}, e.provider.takeCalls())
	assert.Equal(t, map[string]string{"endpoint": "fake://db-0", "token": "tok-1", "note": "mine"}, secretData(t, e.get(secretGVK, unitNamespace, "vault-conn")))
	clean()

	// The token edited: new credentials.
	e.editSecretData(unitNamespace, "vault-conn", map[string]string{"token": "stolen"})
	drifted("key token", "new credentials were set")
	assert.Equal(t, []string{"apply db-0", "apply db-0 reset"}, e.provider.takeCalls())
	assert.Equal(t, map[string]string{"endpoint": "fake://db-0", "token": "tok-2", "note": "mine"}, secretData(t, e.get(secretGVK, unitNamespace, "vault-conn")))
	clean()

	// The token removed: new credentials.
	e.editSecretData(unitNamespace, "vault-conn", nil, "token")
	drifted("key token", "new credentials were set")
	assert.Equal(t, []string{"apply db-0", "apply db-0 reset"}, e.provider.takeCalls())
	assert.Equal(t, map[string]string{"endpoint": "fake://db-0", "token": "tok-3", "note": "mine"}, secretData(t, e.get(secretGVK, unitNamespace, "vault-conn")))
	clean()

	// A reset that fails leaves the parent not Ready, saying so, and the
	// next reconcile tries again.
	e.editSecretData(unitNamespace, "vault-conn", map[string]string{"token": "stolen"})
	e.provider.failing("apply db-0 reset", errors.New("the vault is sealed"))
	_, err := e.reconcile(vault)
	require.Error(t, err)
	c := e.condition(vault, contract.ConditionSynced)
	assert.Equal(t, contract.ReasonConnectionSecretDrifted, c.Reason)
	assert.Equal(t, "resource db: connection Secret vault-conn: key token changed by someone else; resetting the credentials failed: the vault is sealed", c.Message)
	e.provider.failing("apply db-0 reset", nil)
	e.provider.takeCalls()
	drifted("key token", "new credentials were set")
	assert.Equal(t, []string{"apply db-0", "apply db-0 reset"}, e.provider.takeCalls())
	assert.Equal(t, "tok-4", secretData(t, e.get(secretGVK, unitNamespace, "vault-conn"))["token"])
	clean()

	// Another type (the Secret recreated by someone else): it cannot be
	// changed back, so the engine writes it anew, with new credentials.
	sec = e.get(secretGVK, unitNamespace, "vault-conn")
	sec.Object["type"] = "kubernetes.io/basic-auth"
	e.update(sec)
	drifted("type (kubernetes.io/basic-auth, not Opaque)", "new credentials were set")
	assert.Equal(t, []string{"apply db-0 reset"}, e.provider.takeCalls())
	sec = e.get(secretGVK, unitNamespace, "vault-conn")
	assert.Equal(t, "Opaque", sec.Object["type"])
	assert.Equal(t, map[string]string{"endpoint": "fake://db-0", "token": "tok-5"}, secretData(t, sec))
	clean()

	cur := e.reread(vault)
	b, _ := json.Marshal(cur.Object)
	assert.NotContains(t, string(b), "tok-")
}
