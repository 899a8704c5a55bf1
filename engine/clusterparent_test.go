package engine_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/engine"
)

// realmTemplates are cluster-scoped kinds whose targets come from the
// spec, so only the engine's per-parent check can refuse them (engine vet
// refuses literal ones): Realm writes a ConfigMap in spec.namespace and,
// with spec.admin, a ClusterRole; Seeker reads a
// Secret from spec.secretNamespace; neither has a policy. OpenRealm does
// all three with the policy that allows them.
var realmTemplates = map[string]string{
	"realm.cue": `parent: {apiVersion: "realm.cuengine.dev/v1", kind: "Realm", spec: {namespace: string, admin: bool}}
crd: scope: "Cluster"
children: settings: {apiVersion: "v1", kind: "ConfigMap", metadata: {name: "realm-" + parent.metadata.name, namespace: parent.spec.namespace}}
children: {
	if parent.spec.admin {
		admin: {
			apiVersion: "rbac.authorization.k8s.io/v1"
			kind:       "ClusterRole"
			metadata: name: "realm-" + parent.metadata.name
			rules: [{apiGroups: ["*"], resources: ["*"], verbs: ["*"]}]
		}
	}
}
`,
	"seeker.cue": `parent: {apiVersion: "realm.cuengine.dev/v1", kind: "Seeker", spec: secretNamespace: string}
crd: scope: "Cluster"
references: token: {apiVersion: "v1", kind: "Secret", metadata: {name: "token", namespace: parent.spec.secretNamespace}}
status: found: references.token.metadata.name
`,
	"open.cue": `parent: {apiVersion: "realm.cuengine.dev/v1", kind: "OpenRealm", spec: {namespace: string, secretNamespace: string}}
crd: scope: "Cluster"
policy: {crossNamespace: true, clusterScoped: true}
references: token: {apiVersion: "v1", kind: "Secret", metadata: {name: "token", namespace: parent.spec.secretNamespace}}
children: settings: {apiVersion: "v1", kind: "ConfigMap", metadata: {name: "open-" + parent.metadata.name, namespace: parent.spec.namespace}}
children: admin: {
	apiVersion: "rbac.authorization.k8s.io/v1"
	kind:       "ClusterRole"
	metadata: name: "open-" + parent.metadata.name
	rules: [{apiGroups: [""], resources: ["configmaps"], verbs: ["get"]}]
}
status: found: references.token.metadata.name
`,
}

// TestClusterParentNeedsAPolicy: a cluster-scoped parent with no policy
// gets no ConfigMap in kube-system, no ClusterRole and no Secret from
// another namespace; each refusal names the policy field. With the
// policy, all three are written and read.
func TestClusterParentNeedsAPolicy(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	serveTemplates(t, realmTemplates, engine.Options{})

	vault := namespace(t)
	require.NoError(t, k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: vault, Name: "token"}, StringData: map[string]string{"token": "s3cr3t"}}))
	gvk := func(kind string) schema.GroupVersionKind {
		return schema.GroupVersionKind{Group: "realm.cuengine.dev", Version: "v1", Kind: kind}
	}

	realm := parent(gvk("Realm"), "", "closed", map[string]any{"namespace": "kube-system", "admin": true})
	require.NoError(t, k8s.Create(ctx, realm))
	seeker := parent(gvk("Seeker"), "", "closed", map[string]any{"secretNamespace": vault})
	require.NoError(t, k8s.Create(ctx, seeker))
	want := map[*metav1.Condition]string{}
	eventually(t, "both refused, naming the policy field", func(ctx context.Context) (bool, error) {
		rc, err := condition(ctx, realm, contract.ConditionSynced)
		if err != nil || rc == nil || rc.Reason != contract.ReasonChildRefused {
			return false, err
		}
		sc, err := condition(ctx, seeker, contract.ConditionSynced)
		if err != nil || sc == nil || sc.Reason != contract.ReasonReferenceRefused {
			return false, err
		}
		clear(want)
		want[rc], want[sc] = "realm", "seeker"
		return true, nil
	})
	for c := range want {
		assert.Equal(t, metav1.ConditionFalse, c.Status)
		if c.Reason == contract.ReasonChildRefused {
			assert.Contains(t, c.Message, `child admin: ClusterRole "realm-closed" is cluster-scoped; set policy: clusterScoped: true in the template to allow it`)
			assert.Contains(t, c.Message, `child settings: ConfigMap "realm-closed" is in namespace "kube-system"; a cluster-scoped parent has no namespace of its own: list the namespace in policy: crossNamespace in the template to allow it`)
		} else {
			assert.Contains(t, c.Message, `reference token: Secret `+vault+`/token is in namespace "`+vault+`"; a cluster-scoped parent has no namespace of its own: list the namespace in policy: crossNamespace in the template to allow it`)
		}
	}
	err := k8s.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "realm-closed"}, &corev1.ConfigMap{})
	assert.True(t, apierrors.IsNotFound(err), "no ConfigMap in kube-system: %v", err)
	err = k8s.Get(ctx, client.ObjectKey{Name: "realm-closed"}, &rbacv1.ClusterRole{})
	assert.True(t, apierrors.IsNotFound(err), "no ClusterRole: %v", err)
	found, err := statusField(ctx, seeker, "found")
	require.NoError(t, err)
	assert.Empty(t, found, "nothing read from the Secret")

	open := parent(gvk("OpenRealm"), "", "open", map[string]any{"namespace": "kube-system", "secretNamespace": vault})
	require.NoError(t, k8s.Create(ctx, open))
	eventually(t, "the allowed ConfigMap, ClusterRole and Secret", func(ctx context.Context) (bool, error) {
		c, err := condition(ctx, open, contract.ConditionSynced)
		if err != nil || c == nil || c.Status != metav1.ConditionTrue {
			return false, err
		}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "open-open"}, &corev1.ConfigMap{}); err != nil {
			return false, err
		}
		if err := k8s.Get(ctx, client.ObjectKey{Name: "open-open"}, &rbacv1.ClusterRole{}); err != nil {
			return false, err
		}
		found, err := statusField(ctx, open, "found")
		return found == "token", err
	})
}

// statusField reads a string field of a parent's status.
func statusField(ctx context.Context, obj *unstructured.Unstructured, field string) (string, error) {
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(obj.GroupVersionKind())
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
		return "", err
	}
	s, _, _ := unstructured.NestedString(cur.Object, "status", field)
	return s, nil
}
