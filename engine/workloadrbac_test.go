package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/clusters"
	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/templates"
	"github.com/cuengine/engine/templates/rbac"
)

var guardedGVK = schema.GroupVersionKind{Group: "multi.cuengine.dev", Version: "v1", Kind: "Guarded"}

// guardedTemplate puts a Namespace and a ConfigMap (ready once they
// exist, even on a bare control plane) in the cluster its spec names, a
// Deployment in west literally, and a ConfigMap beside the parent.
const guardedTemplate = `parent: {apiVersion: "multi.cuengine.dev/v1", kind: "Guarded", spec: {cluster: string, greeting: *"hello" | string}}
policy: {clusterScoped: true, crossNamespace: true, clusters: ["west"]}
children: ns: {cluster: parent.spec.cluster, apiVersion: "v1", kind: "Namespace", metadata: name: parent.metadata.name}
children: settings: {
	cluster:    parent.spec.cluster
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: {name: "settings", namespace: parent.metadata.name}
	data: greeting: parent.spec.greeting
}
children: app: {
	cluster:    "west"
	apiVersion: "apps/v1"
	kind:       "Deployment"
	metadata: {name: "app", namespace: parent.metadata.name}
	readyWhen: true
	spec: {
		selector: matchLabels: app: "app"
		template: {metadata: labels: app: "app", spec: containers: [{name: "app", image: "nginx"}]}
	}
}
children: note: {apiVersion: "v1", kind: "Service", metadata: name: "note", spec: ports: [{port: 80}]}
`

// TestWorkloadClusterLeastPrivilege gives the engine, in the workload
// cluster west, only the ClusterRole engine rbac --cluster west generates,
// bound to a ServiceAccount there whose token is the kubeconfig of the
// cluster Secret: the engine creates, repairs (a hand edit reverted by
// its watch) and deletes its children there without a refusal, may do
// nothing else there, and the parent's Ready says which child is in which
// cluster.
func TestWorkloadClusterLeastPrivilege(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	west, admin := startWorkload(t)

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "guarded.cue"), []byte(guardedTemplate), 0o644))
	set, err := templates.Load(dir)
	require.NoError(t, err)

	// The role engine rbac --cluster west prints, applied in west and
	// bound to the ServiceAccount engine-system/engine there.
	roles := rbac.GenerateCluster(set, "west", rbac.ClusterOptions{Name: "engine", ServiceAccount: "engine", Namespace: "engine-system"})
	require.Equal(t, []string{"guarded.cue"}, roles.Templates)
	require.NoError(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "engine-system"}}))
	require.NoError(t, admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "engine-system", Name: "engine"}}))
	require.NoError(t, admin.Create(ctx, roles.ClusterRole))
	require.NoError(t, admin.Create(ctx, roles.ClusterRoleBinding))
	westCS, err := kubernetes.NewForConfig(west.Config)
	require.NoError(t, err)
	tok, err := westCS.CoreV1().ServiceAccounts("engine-system").CreateToken(ctx, "engine",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	require.NoError(t, err)
	kubeconfig, err := clientcmd.Write(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"west": {Server: west.Config.Host, CertificateAuthorityData: west.Config.CAData}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"engine": {Token: tok.Status.Token}},
		Contexts:       map[string]*clientcmdapi.Context{"west": {Cluster: "west", AuthInfo: "engine"}},
		CurrentContext: "west",
	})
	require.NoError(t, err)

	// The ServiceAccount may do what the engine does with the children's
	// kinds, and nothing else: not read Secrets, not touch another kind.
	saCfg := rest.CopyConfig(west.Config)
	saCfg.CertData, saCfg.KeyData, saCfg.BearerToken = nil, nil, tok.Status.Token
	saCS, err := kubernetes.NewForConfig(saCfg)
	require.NoError(t, err)
	can := func(verb, group, resource string) bool {
		t.Helper()
		r, err := saCS.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Namespace: "anywhere"}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		return r.Status.Allowed
	}
	for _, verb := range []string{"get", "list", "watch", "create", "patch", "delete"} {
		assert.True(t, can(verb, "apps", "deployments"), "%s deployments", verb)
		assert.True(t, can(verb, "", "configmaps"), "%s configmaps", verb)
	}
	assert.False(t, can("update", "apps", "deployments"), "the engine never updates a remote child")
	assert.False(t, can("get", "", "secrets"), "no Secrets: no child of the template is one")
	assert.False(t, can("list", "", "services"), "the Service stays beside the parent")

	ns := namespace(t)
	require.NoError(t, k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "west", Labels: map[string]string{contract.LabelCluster: "west"}},
		Data: map[string][]byte{contract.KeyKubeconfig: kubeconfig}}))
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	runEngine(t, set, engine.Options{InstallCRDs: true, ResourceResync: 10 * time.Minute, Clusters: clusters.Secrets{Client: cs.CoreV1(), Namespace: ns}, ClusterProbeEvery: 500 * time.Millisecond})

	const name = "guarded"
	p := parent(guardedGVK, ns, name, map[string]any{"cluster": "west"})
	eventually(t, "the Guarded CRD served", func(ctx context.Context) (bool, error) {
		err := k8s.Create(ctx, p.DeepCopy())
		return err == nil, err
	})
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), p.DeepCopy()) })
	settings := &corev1.ConfigMap{}
	eventuallyWithin(t, "the ConfigMap in west", time.Minute, func(ctx context.Context) (bool, error) {
		return admin.Get(ctx, client.ObjectKey{Namespace: name, Name: "settings"}, settings) == nil, nil
	})
	waitReason(t, p, contract.ReasonSynced)
	eventually(t, "Ready, naming where each child is", func(ctx context.Context) (bool, error) {
		c, err := condition(ctx, p, contract.ConditionReady)
		if err != nil || c == nil {
			return false, err
		}
		return c.Status == metav1.ConditionTrue && c.Message == "all children are ready; in cluster west: Namespace guarded, ConfigMap settings, Deployment app", nil
	})
	synced, err := condition(ctx, p, contract.ConditionSynced)
	require.NoError(t, err)
	assert.NotContains(t, strings.ToLower(synced.Message), "forbidden")
	require.NoError(t, admin.Get(ctx, client.ObjectKey{Namespace: name, Name: "app"}, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment"}}))

	// A hand edit in west is reverted through the watch the role allows.
	require.NoError(t, admin.Patch(ctx, settings, client.RawPatch("application/merge-patch+json", []byte(`{"data":{"greeting":"edited"}}`))))
	eventuallyWithin(t, "the edit reverted", 15*time.Second, func(ctx context.Context) (bool, error) {
		err := admin.Get(ctx, client.ObjectKeyFromObject(settings), settings)
		return err == nil && settings.Data["greeting"] == "hello", err
	})

	// The parent deleted: its children in west go, with the role's delete.
	require.NoError(t, k8s.Delete(ctx, p.DeepCopy()))
	eventuallyWithin(t, "the remote children deleted and the parent gone", time.Minute, func(ctx context.Context) (bool, error) {
		if err := admin.Get(ctx, client.ObjectKey{Namespace: name, Name: "settings"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
			return false, err
		}
		dep := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment"}}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: name, Name: "app"}, dep); !apierrors.IsNotFound(err) {
			return false, err
		}
		remoteNS := &corev1.Namespace{}
		err := admin.Get(ctx, client.ObjectKey{Name: name}, remoteNS)
		// A bare control plane has no namespace controller to finish it.
		if err == nil && remoteNS.DeletionTimestamp == nil {
			return false, nil
		}
		err = k8s.Get(ctx, client.ObjectKeyFromObject(p), &unstructured.Unstructured{Object: map[string]any{"apiVersion": "multi.cuengine.dev/v1", "kind": "Guarded"}})
		return apierrors.IsNotFound(err), nil
	})
}
