package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	myKinds     = schema.GroupVersionResource{Group: "webapp.my.domain", Version: "v1", Resource: "mykinds"}
	websitesGVR = schema.GroupVersionResource{Group: "test.cuengine.dev", Version: "v1", Resource: "websites"}
)

// condition returns the status of a condition of a parent ("" if absent).
func condition(ctx context.Context, gvr schema.GroupVersionResource, ns, name, condType string) (string, string, error) {
	u, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", "", err
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m := c.(map[string]any)
		if m["type"] == condType {
			return m["status"].(string), m["reason"].(string) + ": " + m["message"].(string), nil
		}
	}
	return "", "", nil
}

// TestMyKindEndToEnd walks the Kubebuilder MyKind story with kubectl: the sample CR
// gets its Deployment, which heals, scales, renames, becomes Ready on the
// kwok node, and is garbage-collected with its parent.
func TestMyKindEndToEnd(t *testing.T) {
	dir := templatesDir(t, "examples/templates/mykind.cue", "engine/testdata/templates/website.cue")
	installCRDs(t, dir)
	startEngine(t, dir)
	ns := namespace(t)
	ctx := context.Background()

	out := kubectl(t, "-n", ns, "apply", "-f", filepath.Join(repo, "examples/crs/mykind.yaml"))
	assert.Contains(t, out, "mykind.webapp.my.domain/mykind-sample created")

	eventually(t, "Deployment mykind", 30*time.Second, func(ctx context.Context) (bool, error) {
		_, err := kube.AppsV1().Deployments(ns).Get(ctx, "mykind", metav1.GetOptions{})
		return err == nil, err
	})
	d, err := kube.AppsV1().Deployments(ns).Get(ctx, "mykind", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(1), *d.Spec.Replicas)
	assert.Equal(t, "engine", d.Labels["app.kubernetes.io/managed-by"])
	require.NotNil(t, metav1.GetControllerOf(d))
	assert.Equal(t, "mykind-sample", metav1.GetControllerOf(d).Name)

	t.Run("pods become Ready and the status follows", func(t *testing.T) {
		eventually(t, "readyReplicas 1 and Ready=True", 60*time.Second, func(ctx context.Context) (bool, error) {
			u, err := dyn.Resource(myKinds).Namespace(ns).Get(ctx, "mykind-sample", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			n, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
			status, _, err := condition(ctx, myKinds, ns, "mykind-sample", "Ready")
			return n == 1 && status == "True", err
		})
		out := kubectl(t, "-n", ns, "get", "mykind", "mykind-sample")
		assert.Regexp(t, `mykind-sample\s+mykind\s+1\s+1\s+True`, out)
	})

	t.Run("a deleted Deployment comes back", func(t *testing.T) {
		kubectl(t, "-n", ns, "delete", "deployment", "mykind")
		eventually(t, "a new Deployment mykind", 30*time.Second, func(ctx context.Context) (bool, error) {
			n, err := kube.AppsV1().Deployments(ns).Get(ctx, "mykind", metav1.GetOptions{})
			return err == nil && n.UID != d.UID, err
		})
	})

	t.Run("replicas: 3 scales it", func(t *testing.T) {
		kubectl(t, "-n", ns, "patch", "mykind", "mykind-sample", "--type=merge", "-p", `{"spec":{"replicas":3}}`)
		eventually(t, "3 ready replicas reported", 60*time.Second, func(ctx context.Context) (bool, error) {
			u, err := dyn.Resource(myKinds).Namespace(ns).Get(ctx, "mykind-sample", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			n, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas")
			status, _, err := condition(ctx, myKinds, ns, "mykind-sample", "Ready")
			return n == 3 && status == "True", err
		})
	})

	t.Run("renaming deletes the old Deployment", func(t *testing.T) {
		kubectl(t, "-n", ns, "patch", "mykind", "mykind-sample", "--type=merge", "-p", `{"spec":{"deploymentName":"mykind-v2"}}`)
		eventually(t, "mykind-v2 exists, mykind is gone", 30*time.Second, func(ctx context.Context) (bool, error) {
			if _, err := kube.AppsV1().Deployments(ns).Get(ctx, "mykind-v2", metav1.GetOptions{}); err != nil {
				return false, err
			}
			_, err := kube.AppsV1().Deployments(ns).Get(ctx, "mykind", metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	})

	t.Run("deleting the MyKind collects its children", func(t *testing.T) {
		kubectl(t, "-n", ns, "delete", "mykind", "mykind-sample", "--wait=true")
		eventually(t, "the Deployment garbage-collected", 60*time.Second, func(ctx context.Context) (bool, error) {
			_, err := kube.AppsV1().Deployments(ns).Get(ctx, "mykind-v2", metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	})
}

// TestForeignDeploymentUntouched: the Kubebuilder MyKind controller would have rescaled
// any Deployment with its name; the engine leaves it alone and says so.
func TestForeignDeploymentUntouched(t *testing.T) {
	dir := templatesDir(t, "examples/templates/mykind.cue")
	installCRDs(t, dir)
	startEngine(t, dir)
	ns := namespace(t)
	ctx := context.Background()
	kubectl(t, "-n", ns, "create", "deployment", "mine", "--image=busybox", "--replicas=2")
	before, err := kube.AppsV1().Deployments(ns).Get(ctx, "mine", metav1.GetOptions{})
	require.NoError(t, err)

	kubectlApply(t, ns, `
apiVersion: webapp.my.domain/v1
kind: MyKind
metadata: {name: intruder}
spec: {deploymentName: mine, replicas: 5}
`)
	eventually(t, "Synced=False ChildConflict", 30*time.Second, func(ctx context.Context) (bool, error) {
		status, msg, err := condition(ctx, myKinds, ns, "intruder", "Synced")
		return status == "False" && strings.HasPrefix(msg, "ChildConflict: Deployment "+ns+"/mine"), err
	})
	after, err := kube.AppsV1().Deployments(ns).Get(ctx, "mine", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(2), *after.Spec.Replicas)
	assert.Nil(t, metav1.GetControllerOf(after))
	assert.Equal(t, before.Generation, after.Generation, "the foreign Deployment's spec is untouched")
	assert.Contains(t, kubectl(t, "-n", ns, "get", "events", "--field-selector", "reason=ChildConflict"), "not controlled by this MyKind")
}

// TestWebsiteEndToEnd proves the engine generic with a differently shaped
// template: several kinds, a conditional child, status from two children.
func TestWebsiteEndToEnd(t *testing.T) {
	dir := templatesDir(t, "engine/testdata/templates/website.cue")
	installCRDs(t, dir)
	startEngine(t, dir)
	ns := namespace(t)
	kubectlApply(t, ns, `
apiVersion: test.cuengine.dev/v1
kind: Website
metadata: {name: shop}
spec: {image: nginx:1.27, replicas: 2, content: "<h1>shop</h1>"}
`)
	eventually(t, "Website Ready with 2 available", 60*time.Second, func(ctx context.Context) (bool, error) {
		u, err := dyn.Resource(websitesGVR).Namespace(ns).Get(ctx, "shop", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		n, _, _ := unstructured.NestedInt64(u.Object, "status", "available")
		status, _, err := condition(ctx, websitesGVR, ns, "shop", "Ready")
		return n == 2 && status == "True", err
	})
	assert.Contains(t, kubectl(t, "-n", ns, "get", "configmap", "shop-content", "-o", "jsonpath={.data.index\\.html}"), "<h1>shop</h1>")
	kubectl(t, "-n", ns, "get", "service", "shop")
	_, err := kubectlErr("-n", ns, "get", "ingress", "shop")
	assert.Error(t, err, "no Ingress before expose")

	kubectl(t, "-n", ns, "patch", "website", "shop", "--type=merge", "-p", `{"spec":{"expose":true}}`)
	eventually(t, "the Ingress", 30*time.Second, func(ctx context.Context) (bool, error) {
		_, err := kube.NetworkingV1().Ingresses(ns).Get(ctx, "shop", metav1.GetOptions{})
		return err == nil, err
	})
	kubectl(t, "-n", ns, "delete", "website", "shop")
	eventually(t, "children garbage-collected", 60*time.Second, func(ctx context.Context) (bool, error) {
		_, err1 := kube.NetworkingV1().Ingresses(ns).Get(ctx, "shop", metav1.GetOptions{})
		_, err2 := kube.CoreV1().Services(ns).Get(ctx, "shop", metav1.GetOptions{})
		return apierrors.IsNotFound(err1) && apierrors.IsNotFound(err2), nil
	})
}
