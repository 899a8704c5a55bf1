package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/internal/localcluster"
)

// TestConversionOnCluster: a real apiserver converts the App of
// testdata/conversion (v1 flat, v2 grouped and stored, the hub) through
// the engine's /convert, on the CRD the engine installs; the CA is
// injected by the rotator.
func TestConversionOnCluster(t *testing.T) {
	wc, appCUE := newConversionCluster(t)
	c := wc.c
	ctx := context.Background()
	stop := wc.startEngine(t)

	crd := &apiextensionsv1.CustomResourceDefinition{}
	eventuallyCluster(t, "the CRD installed with its conversion webhook and CA", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Name: "apps.apps.example.com"}, crd); err != nil {
			return false, err
		}
		conv := crd.Spec.Conversion
		return conv != nil && conv.Webhook != nil && conv.Webhook.ClientConfig != nil && len(conv.Webhook.ClientConfig.CABundle) > 0, nil
	})
	assert.Equal(t, apiextensionsv1.WebhookConverter, crd.Spec.Conversion.Strategy)
	assert.Regexp(t, `^https://localhost:\d+/convert$`, *crd.Spec.Conversion.Webhook.ClientConfig.URL)
	assert.Equal(t, []string{"v1"}, crd.Status.StoredVersions)

	apply := func(name, manifest string) (string, error) { return wc.applyManifest(t, name, manifest) }
	out := wc.firstApply(t, "web", v1App("web", 3))
	assert.Contains(t, out, "apps.example.com/v1 App is deprecated; use apps.example.com/v2", "the deprecation warning")
	get := func(version, name string) map[string]any { return wc.getApp(t, version, name) }
	t.Run("read in v2 and in v1, the same App", func(t *testing.T) {
		v2 := get("v2", "web")
		assert.Equal(t, "apps.example.com/v2", v2["apiVersion"])
		assert.Equal(t, map[string]any{"container": map[string]any{"image": "nginx:1.27", "replicas": 3.0}}, v2["spec"])
		v1 := get("v1", "web")
		assert.Equal(t, "apps.example.com/v1", v1["apiVersion"])
		assert.Equal(t, map[string]any{"image": "nginx:1.27", "replicas": 3.0}, v1["spec"])
		assert.Equal(t, v1["metadata"].(map[string]any)["uid"], v2["metadata"].(map[string]any)["uid"])
	})

	t.Run("the engine reconciles it in the hub", func(t *testing.T) {
		d := &appsv1.Deployment{}
		eventuallyCluster(t, "the Deployment of web", func(ctx context.Context) (bool, error) {
			return c.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "web"}, d) == nil, nil
		})
		assert.Equal(t, int32(3), *d.Spec.Replicas)
		assert.Equal(t, "nginx:1.27", d.Spec.Template.Spec.Containers[0].Image)
		eventuallyCluster(t, "web's status written (through v2)", func(ctx context.Context) (bool, error) {
			st, _ := get("v1", "web")["status"].(map[string]any)
			return st != nil && st["observedGeneration"] != nil, nil
		})
		rv := d.ResourceVersion
		// Reading and writing in another version is not a change of the
		// App: its Deployment is not written again.
		out, err := wc.kubectl("label", "apps.v1.apps.example.com", "-n", "apps", "web", "team=a")
		require.NoError(t, err, out)
		for range 3 {
			get("v1", "web")
			get("v2", "web")
		}
		// The label is seen by the engine (an evaluation), then nothing.
		eventuallyCluster(t, "the label seen in v2", func(ctx context.Context) (bool, error) {
			md, _ := get("v2", "web")["metadata"].(map[string]any)
			labels, _ := md["labels"].(map[string]any)
			return labels["team"] == "a", nil
		})
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "web"}, d))
		assert.Equal(t, rv, d.ResourceVersion, "the Deployment was not rewritten")
	})

	t.Run("the stored version moves to v2: nothing rewritten, the same App in both", func(t *testing.T) {
		d := &appsv1.Deployment{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "web"}, d))
		rv := d.ResourceVersion
		before := get("v2", "web")
		revision := func() any {
			st, _ := get("v2", "web")["status"].(map[string]any)
			tr, _ := st["templateRevision"].(map[string]any)
			return tr["number"]
		}
		first := revision()
		require.NotNil(t, first)

		edit(t, appCUE, "v2: {}", "v2: storage: true")
		edit(t, appCUE, "\t\tstorage: true\n", "")
		eventuallyCluster(t, "the CRD storing v2", func(ctx context.Context) (bool, error) {
			if err := c.Get(ctx, client.ObjectKey{Name: "apps.apps.example.com"}, crd); err != nil {
				return false, err
			}
			return crd.Spec.Versions[0].Name == "v2" && crd.Spec.Versions[0].Storage, nil
		})
		assert.Contains(t, [][]string{{"v1", "v2"}, {"v2"}}, crd.Status.StoredVersions, "v1 until the engine has migrated the stored Apps")
		eventuallyCluster(t, "web on the new revision", func(ctx context.Context) (bool, error) {
			return revision() != first, nil
		})
		// The leader rewrites the Apps stored in v1, then trims
		// storedVersions.
		eventuallyCluster(t, "storedVersions [v2]", func(ctx context.Context) (bool, error) {
			if err := c.Get(ctx, client.ObjectKey{Name: "apps.apps.example.com"}, crd); err != nil {
				return false, err
			}
			return slices.Equal(crd.Status.StoredVersions, []string{"v2"}), nil
		})
		eventuallyCluster(t, "the StorageMigrated event", func(ctx context.Context) (bool, error) {
			list := &eventsv1.EventList{}
			if err := c.List(ctx, list); err != nil {
				return false, err
			}
			for _, ev := range list.Items {
				if ev.Reason == "StorageMigrated" && ev.Regarding.Name == "apps.apps.example.com" {
					return strings.HasPrefix(ev.Note, "every App is stored in v2: 1 rewritten, 0 already there"), nil
				}
			}
			return false, nil
		})
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "web"}, d))
		assert.Equal(t, rv, d.ResourceVersion, "the Deployment was not rewritten")
		assert.Equal(t, before["spec"], get("v2", "web")["spec"])
		assert.Equal(t, map[string]any{"image": "nginx:1.27", "replicas": 3.0}, get("v1", "web")["spec"])
	})

	t.Run("a v1 App that does not fit v2 is refused, naming the field", func(t *testing.T) {
		out, err := apply("big", v1App("big", 20))
		require.Error(t, err)
		// Refused by the validating webhook, which converts to the hub
		// before the apiserver would for storage.
		assert.Contains(t, out, `admission webhook "parents.engine.cuengine.dev" denied the request: App apps/big (apps.example.com/v1): converting v1 to v2: app.cue:18:30: spec.container.replicas: invalid value 20 (out of bound <=10)`)
		err = c.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "big"}, &appsv1.Deployment{})
		assert.True(t, apierrors.IsNotFound(err), "nothing made of it: %v", err)
		get("v1", "web") // and the others still read
	})

	t.Run("a reload that changes a conversion is what converts", func(t *testing.T) {
		out, err := apply("seven", v1App("seven", 7))
		require.NoError(t, err, out)
		edit(t, appCUE, "out: spec: container: {image: in.spec.image, replicas: in.spec.replicas}", "out: spec: container: {image: in.spec.image, replicas: in.spec.replicas & <=5}")
		waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		// A new App each time: one the old conversion let in is not
		// converted again by an apply that changes nothing.
		attempt := 0
		err = wait.PollUntilContextCancel(waitCtx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
			attempt++
			name := fmt.Sprintf("eight-%d", attempt)
			out, err = apply(name, v1App(name, 8))
			return err != nil, nil
		})
		require.NoError(t, err, "the new conversion never refused; last kubectl output:\n%s", out)
		assert.Regexp(t, `App apps/eight-\d+ \(apps.example.com/v1\): converting v1 to v2: app.cue:33:78: spec.container.replicas: invalid value 8 \(out of bound <=5\)`, out)
	})

	t.Run("restarted with a rotated certificate, the engine keeps converting", func(t *testing.T) {
		require.NoError(t, c.Get(ctx, client.ObjectKey{Name: "apps.apps.example.com"}, crd))
		before := crd.Spec.Conversion.Webhook.ClientConfig.CABundle
		require.NotEmpty(t, before)
		stop()
		// Rotation: the rotator finds an empty Secret and issues a new CA.
		secret := &corev1.Secret{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "engine-system", Name: "engine-webhook-certs"}, secret))
		secret.Data = nil
		require.NoError(t, c.Update(ctx, secret))
		wc.startEngine(t)
		eventuallyCluster(t, "a new CA in the CRD", func(ctx context.Context) (bool, error) {
			if err := c.Get(ctx, client.ObjectKey{Name: "apps.apps.example.com"}, crd); err != nil {
				return false, err
			}
			ca := crd.Spec.Conversion.Webhook.ClientConfig.CABundle
			return len(ca) > 0 && !bytes.Equal(ca, before), nil
		})
		// The apiserver may hold the old CA for a moment.
		var out string
		eventuallyCluster(t, "web read in v1 again", func(context.Context) (bool, error) {
			var err error
			out, err = wc.kubectl("get", "apps.v1.apps.example.com", "-n", "apps", "web", "-o", "jsonpath={.spec.image}")
			return err == nil, nil
		})
		assert.Equal(t, "Warning: apps.example.com/v1 App is deprecated; use apps.example.com/v2\nnginx:1.27", out, "converted from v2, stored")
	})
}

// newConversionCluster is a control plane with the namespaces engine-system
// and apps, and the engine's arguments for the templates of
// testdata/conversion, copied into a directory of the test's with v1
// stored; appCUE is the copy's app.cue, to edit.
func newConversionCluster(t *testing.T) (wc *webhookCluster, appCUE string) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a control plane (run without -short)")
	}
	cluster, err := localcluster.Start(context.Background(), localcluster.Options{Progress: os.Stderr})
	require.NoError(t, err, "starting the control plane (run `make assets` first)")
	t.Cleanup(func() { assert.NoError(t, cluster.Stop()) })
	c, err := client.NewWithWatch(cluster.Config, client.Options{Scheme: newScheme()})
	require.NoError(t, err)
	for _, ns := range []string{"engine-system", "apps"} {
		require.NoError(t, c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	assets, err := localcluster.AssetsDir()
	require.NoError(t, err)
	port := freePort(t)
	tmpl := t.TempDir()
	require.NoError(t, os.CopyFS(tmpl, os.DirFS("testdata/conversion")))
	appCUE = filepath.Join(tmpl, "app.cue")
	edit(t, appCUE, "v2: storage: true", "v2: {}")
	edit(t, appCUE, "v1: {\n", "v1: {\n\t\tstorage: true\n")
	return &webhookCluster{
		c: c, kubeconfig: cluster.Kubeconfig, kubectlBin: filepath.Join(assets, "kubectl"), dir: t.TempDir(),
		args: []string{"run", "--templates", tmpl, "--kubeconfig", cluster.Kubeconfig, "--install-crds",
			"--metrics-bind-address", "0", "--health-probe-bind-address", "0",
			"--webhook-port", fmt.Sprint(port), "--webhook-url", fmt.Sprintf("https://localhost:%d", port),
			"--webhook-namespace", "engine-system", "--webhook-cert-dir", t.TempDir()},
	}, appCUE
}

// v1App is the manifest of an App in v1.
func v1App(name string, replicas int) string {
	return fmt.Sprintf("apiVersion: apps.example.com/v1\nkind: App\nmetadata:\n  name: %s\n  namespace: apps\nspec:\n  image: nginx:1.27\n  replicas: %d\n", name, replicas)
}

// applyManifest is kubectl apply of manifest, written as name.yaml.
func (wc *webhookCluster) applyManifest(t *testing.T, name, manifest string) (string, error) {
	t.Helper()
	path := filepath.Join(wc.dir, name+".yaml")
	require.NoError(t, os.WriteFile(path, []byte(manifest), 0o644))
	return wc.kubectl("apply", "-f", path)
}

// firstApply applies manifest until it is admitted: the first write of a
// kind with versions needs the webhook, which the apiserver may not reach
// (or trust the CA of) for a moment.
func (wc *webhookCluster) firstApply(t *testing.T, name, manifest string) string {
	t.Helper()
	var out string
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		var err error
		out, err = wc.applyManifest(t, name, manifest)
		return err == nil, nil
	})
	require.NoError(t, err, "applying %s; last kubectl output:\n%s", name, out)
	return out
}

// getApp is kubectl get of the App name in version, decoded.
func (wc *webhookCluster) getApp(t *testing.T, version, name string) map[string]any {
	t.Helper()
	out, err := wc.kubectl("get", "apps."+version+".apps.example.com", "-n", "apps", name, "-o", "json")
	require.NoError(t, err, out)
	var obj map[string]any
	require.NoError(t, json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &obj), out)
	return obj
}
