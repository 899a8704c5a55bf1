package migration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/internal/localcluster"
)

const (
	group   = "migrate.cuengine.dev"
	crdName = "widgets." + group
)

func version(name string, storage bool) apiextensionsv1.CustomResourceDefinitionVersion {
	return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: true, Storage: storage,
		Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"spec": {Type: "object", XPreserveUnknownFields: ptr(true)},
			}}}}
}

func ptr[T any](v T) *T { return &v }

// storedVersion reads the apiVersion etcd holds for one object.
func storedVersion(t *testing.T, etcd *clientv3.Client, ns, name string) string {
	t.Helper()
	resp, err := etcd.Get(context.Background(), fmt.Sprintf("/registry/%s/widgets/%s/%s", group, ns, name))
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	var obj struct {
		APIVersion string `json:"apiVersion"`
	}
	require.NoError(t, json.Unmarshal(resp.Kvs[0].Value, &obj))
	return obj.APIVersion
}

// TestMigrateRewritesEveryStoredObject: 200 objects stored in v1, the CRD
// moved to store v2; a migration cut short by its caller leaves
// storedVersions alone, and the next run resumes: afterwards etcd holds
// v2 for every object (read from etcd itself), storedVersions is [v2],
// and a further run writes nothing.
func TestMigrateRewritesEveryStoredObject(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane (run without -short)")
	}
	ctx := context.Background()
	cluster, err := localcluster.Start(ctx, localcluster.Options{Progress: os.Stderr})
	require.NoError(t, err, "run `make assets` first")
	defer cluster.Stop()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, apiextensionsv1.AddToScheme(scheme))
	c, err := client.New(cluster.Config, client.Options{Scheme: scheme})
	require.NoError(t, err)
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{cluster.EtcdURL}, DialTimeout: 10 * time.Second})
	require.NoError(t, err)
	defer etcd.Close()

	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: crdName},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names:    apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{version("v1", true)},
		},
	}
	require.NoError(t, c.Create(ctx, crd))
	established := func() bool {
		cur := &apiextensionsv1.CustomResourceDefinition{}
		if c.Get(ctx, client.ObjectKey{Name: crdName}, cur) != nil {
			return false
		}
		for _, cond := range cur.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true
			}
		}
		return false
	}
	require.Eventually(t, established, time.Minute, 100*time.Millisecond)
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}}))
	const n = 200
	require.Eventually(t, func() bool {
		w := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"image": "nginx"}}}
		w.SetAPIVersion(group + "/v1")
		w.SetKind("Widget")
		w.SetNamespace("apps")
		w.SetName("w000")
		return c.Create(ctx, w) == nil
	}, time.Minute, 200*time.Millisecond, "the kind is served")
	for i := 1; i < n; i++ {
		w := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"image": "nginx"}}}
		w.SetAPIVersion(group + "/v1")
		w.SetKind("Widget")
		w.SetNamespace("apps")
		w.SetName(fmt.Sprintf("w%03d", i))
		require.NoError(t, c.Create(ctx, w))
	}
	assert.Equal(t, group+"/v1", storedVersion(t, etcd, "apps", "w042"))

	cur := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: crdName}, cur))
	cur.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{version("v1", false), version("v2", true)}
	require.NoError(t, c.Update(ctx, cur))
	require.Eventually(t, func() bool {
		require.NoError(t, c.Get(ctx, client.ObjectKey{Name: crdName}, cur))
		return len(cur.Status.StoredVersions) == 2
	}, time.Minute, 100*time.Millisecond)
	assert.Equal(t, []string{"v1", "v2"}, cur.Status.StoredVersions)

	// Cut short after the first page: storedVersions stays.
	cut, stop := context.WithCancel(ctx)
	m := &Migrator{Client: c, QPS: 1000, PageSize: 50, Report: func(p Progress) {
		if p.Rewritten >= 50 {
			stop()
		}
	}}
	first, err := m.Migrate(cut, crdName)
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, first.Done)
	assert.Equal(t, 50, first.Rewritten)
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: crdName}, cur))
	assert.Equal(t, []string{"v1", "v2"}, cur.Status.StoredVersions, "not trimmed before every object moved")
	assert.Equal(t, group+"/v2", storedVersion(t, etcd, "apps", "w000"))
	assert.Equal(t, group+"/v1", storedVersion(t, etcd, "apps", "w199"))

	var reports []Progress
	m = &Migrator{Client: c, QPS: 1000, PageSize: 50, Report: func(p Progress) { reports = append(reports, p) }}
	second, err := m.Migrate(ctx, crdName)
	require.NoError(t, err)
	assert.True(t, second.Done)
	assert.Equal(t, n-50, second.Rewritten, "the rest rewritten")
	assert.Equal(t, 50, second.Current, "the first run's objects cost no write")
	assert.Equal(t, "widgets.migrate.cuengine.dev: to v2 from v1,v2: 150 rewritten, 50 already current, 0 failed", second.String())
	assert.GreaterOrEqual(t, len(reports), 4, "progress after every page")
	for i := range n {
		require.Equal(t, group+"/v2", storedVersion(t, etcd, "apps", fmt.Sprintf("w%03d", i)))
	}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: crdName}, cur))
	assert.Equal(t, []string{"v2"}, cur.Status.StoredVersions)

	third, err := m.Migrate(ctx, crdName)
	require.NoError(t, err)
	assert.Equal(t, Progress{CRD: crdName, From: []string{"v2"}, To: "v2", Done: true}, third, "nothing to do")
}
