package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/internal/localcluster"
	"github.com/cuengine/engine/templates"
)

// webhookCluster is a bare apiserver with the Site CRD and the engine run
// as its own process (the test binary as the CLI), serving the webhook on
// localhost as under engine dev.
type webhookCluster struct {
	c          client.WithWatch
	kubeconfig string
	kubectlBin string
	args       []string
	dir        string // for the manifests kubectl applies
}

func startWebhookCluster(t *testing.T) *webhookCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a control plane (run without -short)")
	}
	set, err := templates.Load("testdata/webhook")
	require.NoError(t, err)
	site := set.Templates()[0]
	require.True(t, site.NeedsAdmission())
	cluster, err := localcluster.Start(context.Background(), localcluster.Options{CRDs: []*apiextensionsv1.CustomResourceDefinition{site.CRD()}, Progress: os.Stderr})
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
	return &webhookCluster{
		c:          c,
		kubeconfig: cluster.Kubeconfig,
		kubectlBin: filepath.Join(assets, "kubectl"),
		dir:        t.TempDir(),
		args: []string{"run", "--templates", "testdata/webhook", "--kubeconfig", cluster.Kubeconfig,
			"--metrics-bind-address", "0", "--health-probe-bind-address", "0",
			"--webhook-port", fmt.Sprint(port), "--webhook-url", fmt.Sprintf("https://localhost:%d", port),
			"--webhook-namespace", "engine-system", "--webhook-cert-dir", t.TempDir()},
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startEngine runs `engine run` as its own process until the returned
// stop, which ends it as Kubernetes would (SIGTERM) and waits.
func (wc *webhookCluster) startEngine(t *testing.T) (stop func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], wc.args...)
	cmd.Env = append(os.Environ(), asCLI+"=1")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
			if t.Failed() {
				t.Logf("engine logs:\n%s", logs.String())
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// kubectl runs the real kubectl against the cluster.
func (wc *webhookCluster) kubectl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, wc.kubectlBin, append([]string{"--kubeconfig", wc.kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// apply is kubectl apply of one Site.
func (wc *webhookCluster) apply(t *testing.T, name, spec string) (string, error) {
	t.Helper()
	path := filepath.Join(wc.dir, name+".yaml")
	manifest := "apiVersion: test.cuengine.dev/v1\nkind: Site\nmetadata:\n  name: " + name + "\n  namespace: apps\nspec:\n" + spec
	require.NoError(t, os.WriteFile(path, []byte(manifest), 0o644))
	return wc.kubectl("apply", "-f", path)
}

// caBundle is the configuration's caBundle, empty until injected.
func (wc *webhookCluster) caBundle(ctx context.Context) ([]byte, error) {
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := wc.c.Get(ctx, client.ObjectKey{Name: "engine.cuengine.dev"}, vwc); err != nil {
		return nil, err
	}
	if len(vwc.Webhooks) != 1 {
		return nil, fmt.Errorf("%d webhooks", len(vwc.Webhooks))
	}
	return vwc.Webhooks[0].ClientConfig.CABundle, nil
}

// refusedWith applies until the webhook answers (the apiserver may still
// hold the previous caBundle for a moment) and returns kubectl's output.
func (wc *webhookCluster) refusedWith(t *testing.T, name, spec string) string {
	t.Helper()
	var out string
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		var err error
		out, err = wc.apply(t, name, spec)
		return err != nil && strings.Contains(out, "site.cue:"), nil
	})
	require.NoError(t, err, "the webhook never answered; last kubectl output:\n%s", out)
	return out
}

const crossFieldRefusal = "The request is invalid: spec.replicas: site.cue:11:27: invalid value 1 (out of bound >=5)\n"

func TestWebhookOnCluster(t *testing.T) {
	wc := startWebhookCluster(t)
	ctx := context.Background()
	// Every version of the configuration the apiserver sees, from before
	// the engine starts: one that calls the webhook without the CA would
	// refuse writes (x509: certificate signed by unknown authority).
	watch, err := wc.c.Watch(ctx, &admissionregistrationv1.ValidatingWebhookConfigurationList{})
	require.NoError(t, err)
	defer watch.Stop()
	stop := wc.startEngine(t)
	eventuallyCluster(t, "the webhook configured, its CA injected", func(ctx context.Context) (bool, error) {
		ca, err := wc.caBundle(ctx)
		return len(ca) > 0, err
	})
	t.Run("the configuration calls the webhook only once it has the CA", func(t *testing.T) {
		timeout := time.After(30 * time.Second)
		for {
			select {
			case <-timeout:
				t.Fatal("no version of the configuration with the CA and without the hold was watched")
			case ev := <-watch.ResultChan():
				vwc, ok := ev.Object.(*admissionregistrationv1.ValidatingWebhookConfiguration)
				require.True(t, ok, "%T", ev.Object)
				require.Len(t, vwc.Webhooks, 1)
				w := vwc.Webhooks[0]
				held := slices.ContainsFunc(w.MatchConditions, func(c admissionregistrationv1.MatchCondition) bool { return c.Expression == "false" })
				if held {
					continue
				}
				require.NotEmpty(t, w.ClientConfig.CABundle, "version %s calls the webhook without the CA", vwc.ResourceVersion)
				return
			}
		}
	})

	t.Run("a cross-field constraint refuses kubectl apply", func(t *testing.T) {
		out := wc.refusedWith(t, "small", "  region: eu\n  minReplicas: 5\n  replicas: 1\n")
		assert.Equal(t, crossFieldRefusal, out)
		err := wc.c.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "small"}, site())
		assert.True(t, apierrors.IsNotFound(err), "a refused Site is not stored: %v", err)
	})

	t.Run("a valid Site is admitted", func(t *testing.T) {
		out, err := wc.apply(t, "web", "  region: eu\n  minReplicas: 2\n  replicas: 3\n")
		require.NoError(t, err, out)
		assert.Equal(t, "site.test.cuengine.dev/web created\n", out)
	})

	t.Run("an immutable field cannot change", func(t *testing.T) {
		out, err := wc.apply(t, "web", "  region: us\n  minReplicas: 2\n  replicas: 3\n")
		require.Error(t, err)
		assert.Contains(t, out, `The Site "web" is invalid: spec.region: Invalid value: "us": spec.region is immutable`)
	})

	// A finalizer, so that deleting with the engine down leaves the Site
	// being deleted until it is removed by hand.
	out, err := wc.kubectl("patch", "-n", "apps", "site", "web", "--type=merge", "-p", `{"metadata":{"finalizers":["test.cuengine.dev/hold"]}}`)
	require.NoError(t, err, out)
	stop()

	t.Run("with the engine stopped, deleting a parent works", func(t *testing.T) {
		out, err := wc.kubectl("delete", "-n", "apps", "site", "web", "--wait=false")
		require.NoError(t, err, out)
		out, err = wc.kubectl("patch", "-n", "apps", "site", "web", "--type=json", "-p", `[{"op":"remove","path":"/metadata/finalizers"}]`)
		require.NoError(t, err, "removing the finalizer of a Site being deleted must not call the webhook: %s", out)
		eventuallyCluster(t, "the Site gone", func(ctx context.Context) (bool, error) {
			err := wc.c.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "web"}, site())
			return apierrors.IsNotFound(err), nil
		})
	})

	t.Run("with the engine stopped, a spec write is refused (failurePolicy Fail)", func(t *testing.T) {
		out, err := wc.apply(t, "later", "  region: eu\n")
		require.Error(t, err)
		assert.Contains(t, out, `failed calling webhook "parents.engine.cuengine.dev"`)
	})

	t.Run("restarted with a rotated certificate, the engine keeps admitting", func(t *testing.T) {
		before, err := wc.caBundle(ctx)
		require.NoError(t, err)
		require.NotEmpty(t, before)
		// Rotation: the CA and serving certificate expire, as the rotator
		// sees an empty Secret.
		secret := &corev1.Secret{}
		require.NoError(t, wc.c.Get(ctx, client.ObjectKey{Namespace: "engine-system", Name: "engine-webhook-certs"}, secret))
		oldCert := secret.Data["tls.crt"]
		require.NotEmpty(t, oldCert)
		secret.Data = nil
		require.NoError(t, wc.c.Update(ctx, secret))

		wc.startEngine(t)
		eventuallyCluster(t, "a new CA injected", func(ctx context.Context) (bool, error) {
			after, err := wc.caBundle(ctx)
			return len(after) > 0 && !bytes.Equal(after, before), err
		})
		require.NoError(t, wc.c.Get(ctx, client.ObjectKey{Namespace: "engine-system", Name: "engine-webhook-certs"}, secret))
		assert.NotEqual(t, oldCert, secret.Data["tls.crt"], "a new serving certificate")
		out := wc.refusedWith(t, "small", "  region: eu\n  minReplicas: 5\n  replicas: 1\n")
		assert.Equal(t, crossFieldRefusal, out)
		out, err = wc.apply(t, "later", "  region: eu\n")
		require.NoError(t, err, out)
	})
}

func site() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(siteGVK)
	return m
}

// eventuallyCluster polls cond until it holds, within 30 seconds.
func eventuallyCluster(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var last error
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		last = err
		return ok && err == nil, nil
	})
	require.NoError(t, err, "waiting for %s (last error: %v)", what, last)
}

var siteGVK = schema.GroupVersionKind{Group: "test.cuengine.dev", Version: "v1", Kind: "Site"}

func TestVetNotesConstraintsBeyondTheCRD(t *testing.T) {
	out, errOut, code := run(t, "vet", "--templates", "testdata/webhook")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "note: site.cue:11:3: parent.spec.replicas: >=minReplicas is not in the CRD: the engine's admission webhook checks it\n", errOut)
	assert.Contains(t, out, "ok  site.cue")
}

// webCUE is issue 51's template: a constraint under an `if` whose
// condition calls a function. Compiling it panicked in cue/format, and a
// running engine that reloaded it exited, on every replica.
const webCUE = `package web

import "strings"

parent: {
	apiVersion: "test.cuengine.dev/v1"
	kind:       "Web"
	spec: {
		image:    string
		replicas: int & >=0
		if strings.HasSuffix(image, ":dev") {replicas: <=10}
	}
}

children: config: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: parent.metadata.name
	data: image: parent.spec.image
}
`

// TestReloadOfAnIfWithACall (issue 51): the engine reloads the template
// above while serving Site, keeps serving Site, and its webhook refuses a
// Web that breaks the `if` at kubectl apply while admitting one that
// keeps it.
func TestReloadOfAnIfWithACall(t *testing.T) {
	wc := startWebhookCluster(t)
	dir := t.TempDir()
	src, err := os.ReadFile("testdata/webhook/site.cue")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "site.cue"), src, 0o644))
	wc.args[2] = dir // --templates
	wc.args = append(wc.args, "--install-crds")
	wc.startEngine(t)
	eventuallyCluster(t, "the webhook configured, its CA injected", func(ctx context.Context) (bool, error) {
		ca, err := wc.caBundle(ctx)
		return len(ca) > 0, err
	})

	require.NoError(t, os.WriteFile(filepath.Join(dir, "web.cue"), []byte(webCUE), 0o644))
	eventuallyCluster(t, "the Web CRD installed by the reload", func(ctx context.Context) (bool, error) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		err := wc.c.Get(ctx, client.ObjectKey{Name: "webs.test.cuengine.dev"}, crd)
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, client.IgnoreNotFound(err)
	})

	applyWeb := func(name, spec string) (string, error) {
		path := filepath.Join(wc.dir, name+".yaml")
		manifest := "apiVersion: test.cuengine.dev/v1\nkind: Web\nmetadata:\n  name: " + name + "\n  namespace: apps\nspec:\n" + spec
		require.NoError(t, os.WriteFile(path, []byte(manifest), 0o644))
		return wc.kubectl("apply", "-f", path)
	}
	var out string
	eventuallyCluster(t, "a Web with replicas 50 and a :dev image refused at kubectl apply", func(context.Context) (bool, error) {
		out, err = applyWeb("big", "  image: web:dev\n  replicas: 50\n")
		return err != nil && strings.Contains(out, "web.cue:"), nil
	})
	assert.Contains(t, out, "spec.replicas: web.cue:11:")
	assert.Contains(t, out, "invalid value 50 (out of bound <=10)")

	out, err = applyWeb("small", "  image: web:dev\n  replicas: 5\n")
	require.NoError(t, err, out)
	out, err = applyWeb("prod", "  image: web:1.0\n  replicas: 50\n")
	require.NoError(t, err, out)
	out, err = wc.apply(t, "still", "  region: eu\n")
	require.NoError(t, err, out)
	for _, name := range []string{"small", "prod", "still"} {
		eventuallyCluster(t, "the ConfigMap of "+name, func(ctx context.Context) (bool, error) {
			err := wc.c.Get(ctx, client.ObjectKey{Namespace: "apps", Name: name}, &corev1.ConfigMap{})
			return err == nil, client.IgnoreNotFound(err)
		})
	}
}

// TestVetNotesAnIfWithACall (issue 51): vet passed over the template above
// by crashing before; it passes with the admission note at the `if`.
func TestVetNotesAnIfWithACall(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "web.cue"), []byte(webCUE), 0o644))
	out, errOut, code := run(t, "vet", "--templates", dir)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, `note: web.cue:11:3: parent.spec: if strings.HasSuffix(image, ":dev") {replicas: <=10} is not in the CRD: the engine's admission webhook checks it`+"\n", errOut)
	assert.Contains(t, out, "ok  web.cue")
}
