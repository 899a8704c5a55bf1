package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zapcore"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/internal/localcluster"
	"github.com/cuengine/engine/templates"
)

// The control plane and the engine running the templates in
// testdata/templates, once started.
var (
	cfg          *rest.Config
	k8s          client.Client
	set          *templates.Set
	sharedEngine *engine.Engine
)

var (
	myKindGVK  = schema.GroupVersionKind{Group: "webapp.my.domain", Version: "v1", Kind: "MyKind"}
	websiteGVK = schema.GroupVersionKind{Group: "test.cuengine.dev", Version: "v1", Kind: "Website"}
	portalGVK  = schema.GroupVersionKind{Group: "test.cuengine.dev", Version: "v1", Kind: "Portal"}
)

// The integration tests share one bare control plane (apiserver + etcd)
// and one engine, started by the first test that needs them; the unit tests
// (the ones go test -short runs) need neither.
var (
	controlPlaneOnce sync.Once
	controlPlaneErr  error
	stopControlPlane = func() {}
)

func TestMain(m *testing.M) {
	code := m.Run()
	stopControlPlane()
	pg.Stop()
	os.Exit(code)
}

// controlPlane starts the shared control plane and engine on first use. The
// fast lane (go test -short, make test-unit) skips the tests that call it.
func controlPlane(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a control plane (run without -short)")
	}
	controlPlaneOnce.Do(func() { controlPlaneErr = startControlPlane() })
	require.NoError(t, controlPlaneErr)
}

func startControlPlane() error {
	ctx, cancel := context.WithCancel(context.Background())
	var err error
	set, err = templates.Load("testdata/templates")
	if err != nil {
		cancel()
		return err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, t := range set.Templates() {
		crds = append(crds, t.CRD())
	}
	cluster, err := localcluster.Start(ctx, localcluster.Options{CRDs: crds, Progress: os.Stderr})
	if err != nil {
		cancel()
		return fmt.Errorf("starting the control plane (run `make assets` first): %w", err)
	}
	stopControlPlane = func() { cancel(); cluster.Stop() }
	cfg = cluster.Config
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), apiextensionsv1.AddToScheme(scheme)); err != nil {
		return err
	}
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.Level(zapLevel()))))
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", MapperProvider: engine.NewRESTMapper})
	if err != nil {
		return err
	}
	if sharedEngine, err = engine.New(mgr, engine.Options{MaxConcurrentReconciles: 2}); err != nil {
		return err
	}
	sharedEngine.SetTemplates(set)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	stopControlPlane = func() { cancel(); <-done; cluster.Stop() }
	return nil
}

// namespace creates a namespace for one test.
func namespace(t *testing.T) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	require.NoError(t, k8s.Create(context.Background(), ns))
	return name
}

func parent(gvk schema.GroupVersionKind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// eventually polls cond until it holds or the bounded timeout passes.
func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	eventuallyWithin(t, what, 30*time.Second, cond)
}

// eventuallyWithin is eventually with its own bound.
func eventuallyWithin(t *testing.T, what string, timeout time.Duration, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		if err != nil {
			last = err
			return false, nil
		}
		return ok, nil
	})
	require.NoError(t, err, "waiting for %s (last error: %v)", what, last)
}

func getDeployment(ctx context.Context, ns, name string) (*appsv1.Deployment, error) {
	d := &appsv1.Deployment{}
	return d, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d)
}

// markReady plays the Deployment controller: all replicas ready.
func markReady(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	d, err := getDeployment(context.Background(), ns, name)
	require.NoError(t, err)
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas, UpdatedReplicas: replicas,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
		}}
	require.NoError(t, k8s.Status().Update(context.Background(), d))
}

// readyReplicas reads a MyKind's status.readyReplicas.
func readyReplicas(ctx context.Context, mk *unstructured.Unstructured) (int64, error) {
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(myKindGVK)
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(mk), cur); err != nil {
		return 0, err
	}
	n, _, _ := unstructured.NestedInt64(cur.Object, "status", "readyReplicas")
	return n, nil
}

func condition(ctx context.Context, obj *unstructured.Unstructured, condType string) (*metav1.Condition, error) {
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(obj.GroupVersionKind())
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
		return nil, err
	}
	raw, _, _ := unstructured.NestedSlice(cur.Object, "status", "conditions")
	var conds []metav1.Condition
	for _, r := range raw {
		m := r.(map[string]any)
		conds = append(conds, metav1.Condition{Type: m["type"].(string), Status: metav1.ConditionStatus(m["status"].(string)), Reason: fmt.Sprint(m["reason"]), Message: fmt.Sprint(m["message"])})
	}
	return meta.FindStatusCondition(conds, condType), nil
}

func TestMyKindLifecycle(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	ns := namespace(t)
	mk := parent(myKindGVK, ns, "mykind-sample", map[string]any{"deploymentName": "mykind"})
	require.NoError(t, k8s.Create(ctx, mk))

	var d *appsv1.Deployment
	eventually(t, "the Deployment", func(ctx context.Context) (bool, error) {
		var err error
		d, err = getDeployment(ctx, ns, "mykind")
		return err == nil, err
	})
	assert.Equal(t, int32(1), *d.Spec.Replicas)
	assert.Equal(t, "nginx:latest", d.Spec.Template.Spec.Containers[0].Image)
	assert.Equal(t, "mykind", d.Spec.Selector.MatchLabels["deployment-name"])
	assert.Equal(t, contract.ManagedByValue, d.Labels[contract.LabelManagedBy])
	assert.Equal(t, "deployment", d.Labels[contract.LabelChild])
	ref := metav1.GetControllerOf(d)
	require.NotNil(t, ref)
	assert.Equal(t, "MyKind", ref.Kind)
	assert.Equal(t, "mykind-sample", ref.Name)

	t.Run("drift is corrected", func(t *testing.T) {
		d, err := getDeployment(ctx, ns, "mykind")
		require.NoError(t, err)
		five := int32(5)
		d.Spec.Replicas = &five
		require.NoError(t, k8s.Update(ctx, d))
		eventually(t, "replicas back to 1", func(ctx context.Context) (bool, error) {
			d, err := getDeployment(ctx, ns, "mykind")
			return err == nil && *d.Spec.Replicas == 1, err
		})
	})

	t.Run("a deleted child is recreated", func(t *testing.T) {
		d, err := getDeployment(ctx, ns, "mykind")
		require.NoError(t, err)
		require.NoError(t, k8s.Delete(ctx, d))
		eventually(t, "a new Deployment", func(ctx context.Context) (bool, error) {
			n, err := getDeployment(ctx, ns, "mykind")
			return err == nil && n.UID != d.UID, err
		})
	})

	t.Run("scaling the parent scales the child", func(t *testing.T) {
		require.NoError(t, k8s.Patch(ctx, mk, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":3}}`))))
		eventually(t, "replicas 3", func(ctx context.Context) (bool, error) {
			d, err := getDeployment(ctx, ns, "mykind")
			return err == nil && *d.Spec.Replicas == 3, err
		})
	})

	t.Run("status follows the child", func(t *testing.T) {
		markReady(t, ns, "mykind", 3)
		eventually(t, "readyReplicas 3 and Ready", func(ctx context.Context) (bool, error) {
			ready, err := readyReplicas(ctx, mk)
			if err != nil {
				return false, err
			}
			c, err := condition(ctx, mk, contract.ConditionReady)
			return ready == 3 && c != nil && c.Status == metav1.ConditionTrue, err
		})
	})

	t.Run("renaming prunes the old child", func(t *testing.T) {
		require.NoError(t, k8s.Patch(ctx, mk, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"deploymentName":"renamed"}}`))))
		eventually(t, "new Deployment, old one gone", func(ctx context.Context) (bool, error) {
			if _, err := getDeployment(ctx, ns, "renamed"); err != nil {
				return false, err
			}
			_, err := getDeployment(ctx, ns, "mykind")
			return apierrors.IsNotFound(err), nil
		})
	})
}

func TestForeignChildIsLeftAlone(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	ns := namespace(t)
	two := int32(2)
	foreign := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &two,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "other"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			},
		},
	}
	require.NoError(t, k8s.Create(ctx, foreign))
	mk := parent(myKindGVK, ns, "greedy", map[string]any{"deploymentName": "taken"})
	require.NoError(t, k8s.Create(ctx, mk))
	eventually(t, "Synced=False ChildConflict", func(ctx context.Context) (bool, error) {
		c, err := condition(ctx, mk, contract.ConditionSynced)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == contract.ReasonChildConflict &&
			strings.Contains(c.Message, "Deployment "+ns+"/taken"), err
	})
	d, err := getDeployment(ctx, ns, "taken")
	require.NoError(t, err)
	assert.Equal(t, foreign.ResourceVersion, d.ResourceVersion, "the foreign Deployment must not be written")
	assert.Equal(t, int32(2), *d.Spec.Replicas)
	assert.Nil(t, metav1.GetControllerOf(d))
}

func TestInvalidSpecTouchesNoChild(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	ns := namespace(t)
	site := parent(websiteGVK, ns, "site", map[string]any{"image": "nginx", "replicas": int64(3)})
	require.NoError(t, k8s.Create(ctx, site))
	eventually(t, "the site's Deployment", func(ctx context.Context) (bool, error) {
		_, err := getDeployment(ctx, ns, "site")
		return err == nil, err
	})
	before, err := getDeployment(ctx, ns, "site")
	require.NoError(t, err)

	// replicas below minReplicas: the CRD cannot express it, CUE refuses it.
	require.NoError(t, k8s.Patch(ctx, site, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"minReplicas":5}}`))))
	eventually(t, "Synced=False InvalidSpec", func(ctx context.Context) (bool, error) {
		c, err := condition(ctx, site, contract.ConditionSynced)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == contract.ReasonInvalidSpec &&
			strings.Contains(c.Message, "parent.spec.replicas") && strings.Contains(c.Message, "website.cue:"), err
	})
	after, err := getDeployment(ctx, ns, "site")
	require.NoError(t, err)
	assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "no child may change while the spec is invalid")

	events := &corev1.EventList{}
	require.NoError(t, k8s.List(ctx, events, client.InNamespace(ns)))
	found := false
	for _, e := range events.Items {
		if e.Type == corev1.EventTypeWarning && e.Reason == contract.ReasonInvalidSpec {
			found = true
		}
	}
	assert.True(t, found, "a Warning event InvalidSpec on the parent")

	// Fixing the spec syncs again.
	require.NoError(t, k8s.Patch(ctx, site, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"minReplicas":1}}`))))
	eventually(t, "Synced=True", func(ctx context.Context) (bool, error) {
		c, err := condition(ctx, site, contract.ConditionSynced)
		return c != nil && c.Status == metav1.ConditionTrue, err
	})
}

func TestWebsiteConditionalChild(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	ns := namespace(t)
	site := parent(websiteGVK, ns, "blog", map[string]any{"image": "nginx"})
	require.NoError(t, k8s.Create(ctx, site))
	for _, obj := range []client.Object{&corev1.ConfigMap{}, &corev1.Service{}, &appsv1.Deployment{}} {
		name := "blog"
		if _, ok := obj.(*corev1.ConfigMap); ok {
			name = "blog-content"
		}
		eventually(t, fmt.Sprintf("%T", obj), func(ctx context.Context) (bool, error) {
			return true, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
		})
	}
	ingress := &unstructured.Unstructured{}
	ingress.SetGroupVersionKind(schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"})
	err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "blog"}, ingress)
	assert.True(t, apierrors.IsNotFound(err), "no Ingress until expose is set")

	require.NoError(t, k8s.Patch(ctx, site, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"expose":true}}`))))
	eventually(t, "the Ingress", func(ctx context.Context) (bool, error) {
		return true, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "blog"}, ingress)
	})
	require.NoError(t, k8s.Patch(ctx, site, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"expose":false}}`))))
	eventually(t, "the Ingress pruned", func(ctx context.Context) (bool, error) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "blog"}, ingress)
		return apierrors.IsNotFound(err), nil
	})
}

func zapLevel() int8 {
	if os.Getenv("ENGINE_TEST_DEBUG") != "" {
		return -1
	}
	return 2 // errors only
}
