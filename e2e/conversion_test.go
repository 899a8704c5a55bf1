package e2e

// The conversion webhook as the chart and config/ install it
// (docs/operations.md, Conversion webhook): with the versions example (App
// v1 and v2, v2 stored) as the templates, the apiserver converts through
// the release's webhook Service, and the engine injects its CA into the
// CRD it installs.
//
// The Deployment's pods run on the fake node and serve nothing, so the
// engine on this machine stands in for them, with the installed
// Deployment's arguments, templates and ServiceAccount: the Deployment is
// scaled to zero and an EndpointSlice of the webhook Service points at the
// engine's webhook port on this machine's address. The full cluster's
// apiserver runs with --enable-aggregator-routing, so it calls a Service's
// endpoints as a cluster's DNS and network would have it.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// versionsCRD is the CRD of examples/versions/templates.
const versionsCRD = "apps.apps.example.com"

// TestDeployServesConversion installs the engine with the versions example
// with Helm and with a kustomize overlay of config/, and reads an App
// created in v1 in both versions through the release's Service.
func TestDeployServesConversion(t *testing.T) {
	host := hostAddress(t)
	versions := filepath.Join(repo, "examples/versions/templates")
	rbac, err := runEngine("rbac", "--templates", versions, "--install-crds")
	require.NoError(t, err, "engine rbac")

	t.Run("helm", func(t *testing.T) {
		helm := helmCommand(t)
		ownNamespace(t)
		t.Cleanup(func() {
			if out, err := helm("uninstall", helmRelease, "-n", deployNamespace, "--wait", "--timeout=2m"); err != nil {
				t.Errorf("cleanup: helm uninstall: %v: %s", err, out)
			}
		})
		rbacFile := filepath.Join(t.TempDir(), "rbac.yaml")
		require.NoError(t, os.WriteFile(rbacFile, []byte(rbac), 0o644))
		// As docs/operations.md installs your own templates.
		out, err := helm("install", helmRelease, filepath.Join(repo, "charts/engine"), "-n", deployNamespace, "--skip-crds",
			"--set-file", `templates.files.app\.cue=`+filepath.Join(versions, "app.cue"), "--set-file", "rbac.generated="+rbacFile)
		require.NoError(t, err, "helm install: %s", out)
		servesConversion(t, liveRelease(t, helm), host)
	})

	t.Run("kustomize", func(t *testing.T) {
		dir := versionsOverlay(t, versions, rbac)
		ownNamespace(t)
		t.Cleanup(func() {
			if out, err := kubectlErr("delete", "-k", dir, "--ignore-not-found", "--wait", "--timeout=2m"); err != nil {
				t.Errorf("cleanup: kubectl delete -k: %v: %s", err, out)
			}
		})
		out := kubectl(t, "apply", "--server-side", "-k", dir)
		assert.NotContains(t, out, "customresourcedefinition", "the overlay leaves the example CRDs out")
		servesConversion(t, renderConfig(t, dir), host)
	})
}

// servesConversion runs the engine as the installed Deployment would,
// behind its webhook Service, and checks that the apiserver converts the
// App through it.
func servesConversion(t *testing.T, m *deployManifests, host string) {
	t.Helper()
	d := m.deployment(t)
	c := d.Spec.Template.Spec.Containers[0]
	flags := parseFlags(c.Args[1:])

	// The Deployment names the Service, and the Service reaches the
	// container's webhook port: what a cluster's network would use.
	svc := m.get(t, "Service", deployNamespace, flags["webhook-service"])
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	require.Len(t, ports, 1)
	port := ports[0].(map[string]any)
	assert.EqualValues(t, 443, port["port"], "the --webhook-service-port the engine writes into the CRD (its default)")
	assert.NotContains(t, flags, "webhook-service-port")
	var containerPort int32
	for _, p := range c.Ports {
		if p.Name == port["targetPort"] {
			containerPort = p.ContainerPort
		}
	}
	assert.Equal(t, flags["webhook-port"], strconv.Itoa(int(containerPort)), "the Service's targetPort is the container's --webhook-port")
	selector, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
	for k, v := range selector {
		assert.Equal(t, v, d.Spec.Template.Labels[k], "the Service selects the engine's pods")
	}

	// The engine on this machine in place of the pods.
	kubectl(t, "-n", deployNamespace, "scale", "deployment/"+d.Name, "--replicas=0")
	eventually(t, "the pods gone", time.Minute, func(ctx context.Context) (bool, error) {
		out, err := kubectlErr("-n", deployNamespace, "get", "pods", "-l", "app.kubernetes.io/name=engine", "-o", "name")
		return strings.TrimSpace(out) == "", err
	})
	webhookPort := freePort(t)
	slice := fmt.Sprintf(`apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %[1]s-e2e
  labels:
    kubernetes.io/service-name: %[1]s
    endpointslice.kubernetes.io/managed-by: e2e.cuengine.dev
addressType: IPv4
endpoints:
- addresses: [%[2]q]
  conditions: {ready: true}
ports:
- name: %[3]s
  port: %[4]d
  protocol: TCP
`, svc.GetName(), host, port["name"], webhookPort)
	kubectlApply(t, deployNamespace, slice)

	ns := namespace(t)
	t.Cleanup(func() { _, _ = kubectlErr("delete", "namespace", ns, "--wait=false") })
	grantRevisions(t, m.get(t, "Role", deployNamespace, "engine"), revisionNamespace(t))
	args := append(containerArgs(t, c, ns, freeAddr(t)),
		"--webhook-port="+strconv.Itoa(webhookPort),
		// In the pod, the namespace of its ServiceAccount.
		"--webhook-namespace="+deployNamespace,
		"--webhook-cert-dir="+t.TempDir())
	eng := startEngine(t, m.mountedTemplates(t), args...)
	// Before the engine stops (cleanups run last first): the App's
	// finalizer is the engine's, and the CRD goes with the test.
	t.Cleanup(func() {
		for _, args := range [][]string{
			{"-n", ns, "delete", "apps.v2.apps.example.com", "--all", "--wait", "--timeout=1m"},
			{"delete", "crd", versionsCRD, "--ignore-not-found", "--wait", "--timeout=1m"},
		} {
			if out, err := kubectlErr(args...); err != nil {
				t.Errorf("cleanup: kubectl %s: %v: %s", strings.Join(args, " "), err, out)
			}
		}
	})

	// The leader installs the CRD with the Service as its conversion
	// webhook, and the CA of the Secret it keeps.
	var crd struct {
		Spec struct {
			Conversion struct {
				Strategy string
				Webhook  struct {
					ClientConfig struct {
						Service  map[string]any
						URL      string
						CABundle string
					}
				}
			}
		}
	}
	eventually(t, "the CRD with the engine's CA", time.Minute, func(ctx context.Context) (bool, error) {
		out, err := kubectlErr("get", "crd", versionsCRD, "-o", "json")
		if err != nil {
			return false, nil
		}
		if err := json.Unmarshal([]byte(out), &crd); err != nil {
			return false, err
		}
		ca, err := kubectlErr("-n", deployNamespace, "get", "secret", "engine-webhook-certs", "-o", `jsonpath={.data.ca\.crt}`)
		return err == nil && ca != "" && crd.Spec.Conversion.Webhook.ClientConfig.CABundle == ca, nil
	})
	cc := crd.Spec.Conversion.Webhook.ClientConfig
	assert.Equal(t, "Webhook", crd.Spec.Conversion.Strategy)
	assert.Equal(t, map[string]any{"namespace": deployNamespace, "name": svc.GetName(), "path": "/convert", "port": 443.0}, cc.Service)
	assert.Empty(t, cc.URL)
	pem, err := base64.StdEncoding.DecodeString(cc.CABundle)
	require.NoError(t, err)
	assert.Contains(t, string(pem), "BEGIN CERTIFICATE")

	// Created in v1 (the apiserver converts it to v2 to store it), read in
	// both. The first call may come before the apiserver trusts the CA.
	app := "apiVersion: apps.example.com/v1\nkind: App\nmetadata: {name: web}\nspec: {image: 'nginx:1.27', replicas: 3}\n"
	var out string
	eventually(t, "the App created in v1", time.Minute, func(ctx context.Context) (bool, error) {
		out, err = kubectlStdinErr(app, "-n", ns, "apply", "-f", "-")
		if err != nil {
			return false, fmt.Errorf("%w: %s", err, out)
		}
		return true, nil
	})
	assert.Contains(t, out, "apps.example.com/v1 App is deprecated; use apps.example.com/v2", "the deprecation warning")
	get := func(version string) map[string]any {
		out := kubectl(t, "-n", ns, "get", "apps."+version+".apps.example.com", "web", "-o", "json")
		warning, body, _ := strings.Cut(out, "{") // kubectl's warnings (stderr) come first
		if version == "v1" {
			assert.Contains(t, warning, "apps.example.com/v1 App is deprecated")
		}
		var obj map[string]any
		require.NoError(t, json.Unmarshal([]byte("{"+body), &obj), out)
		return obj
	}
	v1, v2 := get("v1"), get("v2")
	assert.Equal(t, "apps.example.com/v1", v1["apiVersion"])
	assert.Equal(t, map[string]any{"image": "nginx:1.27", "replicas": 3.0}, v1["spec"])
	assert.Equal(t, "apps.example.com/v2", v2["apiVersion"])
	assert.Equal(t, map[string]any{"container": map[string]any{"image": "nginx:1.27", "replicas": 3.0}}, v2["spec"])
	assert.Equal(t, v1["metadata"].(map[string]any)["uid"], v2["metadata"].(map[string]any)["uid"], "one App")
	assert.Contains(t, eng.log.String(), `"msg":"starting the webhook server"`)
	assert.NotContains(t, eng.log.String(), "forbidden", "the release's role covers the certificates and the CRD's caBundle")
}

// ownNamespace creates engine-system for a test unless it exists, and
// deletes it afterwards if it did not.
func ownNamespace(t *testing.T) {
	t.Helper()
	if strings.TrimSpace(kubectl(t, "get", "namespace", deployNamespace, "--ignore-not-found", "-o", "name")) != "" {
		return
	}
	kubectl(t, "create", "namespace", deployNamespace)
	t.Cleanup(func() {
		if out, err := kubectlErr("delete", "namespace", deployNamespace, "--ignore-not-found", "--wait", "--timeout=2m"); err != nil {
			t.Errorf("cleanup: deleting namespace %s: %v: %s", deployNamespace, err, out)
		}
	})
}

// versionsOverlay writes a kustomize overlay of config/ that deploys the
// templates of dir, as docs/operations.md tells a user with their own
// templates: the ConfigMap and the templates volume's items replaced, the
// role replaced by the one engine rbac generates, and config/'s CRDs (the
// example kinds', which other tests use) left out: the engine installs
// its templates' CRDs itself (--install-crds).
func versionsOverlay(t *testing.T, dir, rbac string) string {
	t.Helper()
	overlay := t.TempDir()
	base, err := filepath.Rel(overlay, filepath.Join(repo, "config")) // kustomize wants relative paths
	require.NoError(t, err)
	app, err := os.ReadFile(filepath.Join(dir, "app.cue"))
	require.NoError(t, err)
	var deleteCRDs []string
	for _, o := range renderConfig(t, filepath.Join(repo, "config")).objs {
		if o.GetKind() == "CustomResourceDefinition" {
			deleteCRDs = append(deleteCRDs, fmt.Sprintf("$patch: delete\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: %s\n", o.GetName()))
		}
	}
	require.NotEmpty(t, deleteCRDs)
	files := map[string]string{
		"kustomization.yaml": fmt.Sprintf(`namespace: %s
resources:
- %s
configMapGenerator:
- name: engine-templates
  behavior: replace
  options:
    disableNameSuffixHash: true
    labels:
      app.kubernetes.io/name: engine
      app.kubernetes.io/component: templates
  files:
  - app.cue
patches:
- path: templates-volume.yaml
- path: rbac.yaml
- path: no-example-crds.yaml
`, deployNamespace, base),
		"app.cue": string(app),
		"templates-volume.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: engine
spec:
  template:
    spec:
      volumes:
      - name: templates
        configMap:
          name: engine-templates
          items:
          - key: app.cue
            path: app.cue
`,
		"rbac.yaml":            rbac,
		"no-example-crds.yaml": strings.Join(deleteCRDs, "---\n"),
	}
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(overlay, name), []byte(content), 0o644))
	}
	return overlay
}

// hostAddress is this machine's first IPv4 address that is neither
// loopback nor link-local: the apiserver can call it, and an EndpointSlice
// may hold it (the apiserver refuses loopback endpoints).
func hostAddress(t *testing.T) string {
	t.Helper()
	ifaces, err := net.Interfaces()
	require.NoError(t, err)
	for _, iface := range ifaces {
		if iface.Flags&net.FlagUp == 0 || iface.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := iface.Addrs()
		require.NoError(t, err)
		for _, a := range addrs {
			ipnet, ok := a.(*net.IPNet)
			if !ok || ipnet.IP.To4() == nil || ipnet.IP.IsLoopback() || ipnet.IP.IsLinkLocalUnicast() {
				continue
			}
			return ipnet.IP.String()
		}
	}
	require.FailNow(t, "no IPv4 address but loopback on this machine: the apiserver has nowhere to call the engine's webhook")
	return ""
}

// freePort is a free TCP port of this machine.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", ":0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// kubectlStdinErr is kubectlStdin that returns the error.
func kubectlStdinErr(stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", cluster.Kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
