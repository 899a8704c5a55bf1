package e2e

// The deploy manifests in config/ (docs/operations.md): the generated files
// match the generators, kustomize renders them, the templates ConfigMap
// mounts as examples/templates, the result applies to a real apiserver, and
// the Deployment's own arguments serve the templates with only the
// ServiceAccount's role.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"
)

const (
	deployNamespace      = "engine-system"
	deployServiceAccount = "engine"
	deployImage          = "ghcr.io/cuengine/engine"
)

// regenerateConfig is printed when config/ no longer matches the templates.
const regenerateConfig = `config/ or charts/engine/ is stale; regenerate them with ` + "`make generate`" + `,
and list any new template file in config/kustomization.yaml (configMapGenerator)
and config/deployment.yaml (the items of the templates volume).`

// TestDeployGeneratedManifests: config/crds.yaml and config/rbac.yaml, and
// their copies in the Helm chart, are exactly what the engine generates from
// the example templates today (as `make verify` checks, for a plain go test
// too).
func TestDeployGeneratedManifests(t *testing.T) {
	crds := []string{"crds", "--templates", filepath.Join(repo, "examples/templates")}
	rbac := []string{"rbac", "--templates", filepath.Join(repo, "examples/templates"), "--install-crds"}
	for _, g := range []struct {
		file string
		args []string
	}{
		{"config/crds.yaml", crds},
		{"config/rbac.yaml", rbac},
		{"charts/engine/crds/crds.yaml", crds},
		{"charts/engine/files/rbac.yaml", rbac},
	} {
		want, err := runEngine(g.args...)
		require.NoError(t, err, "engine %s", strings.Join(g.args, " "))
		got, err := os.ReadFile(filepath.Join(repo, g.file))
		require.NoError(t, err)
		if string(got) != want {
			t.Errorf("%s differs from `engine %s` at %s", g.file, g.args[0], firstDifference(string(got), want))
		}
	}
	if t.Failed() {
		t.Log(regenerateConfig)
	}
}

// TestDeployKustomize renders config/ with the real kubectl and checks that
// its parts fit together.
func TestDeployKustomize(t *testing.T) {
	m := renderConfig(t, filepath.Join(repo, "config"))
	for _, want := range []string{
		"Namespace//" + deployNamespace,
		"ServiceAccount/" + deployNamespace + "/" + deployServiceAccount,
		"ClusterRole//engine", "ClusterRoleBinding//engine",
		"Role/" + deployNamespace + "/engine", "RoleBinding/" + deployNamespace + "/engine",
		"ClusterRole//engine-metrics-reader",
		"CustomResourceDefinition//mykinds.webapp.my.domain",
		"CustomResourceDefinition//gcs.storage.matsumo.dev",
		"CustomResourceDefinition//storefronts.apps.cuengine.dev",
		"ConfigMap/" + deployNamespace + "/engine-templates",
		"Deployment/" + deployNamespace + "/engine",
		"PodDisruptionBudget/" + deployNamespace + "/engine",
		"Service/" + deployNamespace + "/engine-metrics",
	} {
		assert.Contains(t, m.keys(), want)
	}
	for _, o := range m.objs {
		if o.GetKind() != "Namespace" && o.GetKind() != "CustomResourceDefinition" && !strings.HasPrefix(o.GetKind(), "ClusterRole") {
			assert.Equal(t, deployNamespace, o.GetNamespace(), "%s %s", o.GetKind(), o.GetName())
		}
	}

	d := m.deployment(t)
	pod := d.Spec.Template.Spec
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	assert.True(t, strings.HasPrefix(c.Image, deployImage+":v"), "image %s is pinned to a release", c.Image)
	raw, err := os.ReadFile(filepath.Join(repo, "config/deployment.yaml"))
	require.NoError(t, err)
	var plain appsv1.Deployment
	require.NoError(t, yaml.Unmarshal(raw, &plain))
	assert.Equal(t, c.Image, plain.Spec.Template.Spec.Containers[0].Image,
		"config/deployment.yaml (used without kustomize) and the images: of config/kustomization.yaml name the same release")
	require.NotEmpty(t, c.Args)
	assert.Equal(t, "run", c.Args[0])
	flags := parseFlags(c.Args[1:])
	for _, f := range []string{"install-crds", "leader-elect"} {
		assert.Contains(t, flags, f)
	}
	assert.Equal(t, deployNamespace, flags["leader-election-namespace"])
	assert.Greater(t, *d.Spec.Replicas, int32(1), "a standby replica")

	// The identity, the role binding and the leader election namespace agree.
	assert.Equal(t, deployServiceAccount, pod.ServiceAccountName)
	binding := m.get(t, "ClusterRoleBinding", "", "engine")
	subjects, _, _ := unstructured.NestedSlice(binding.Object, "subjects")
	assert.Contains(t, subjects, map[string]any{"kind": "ServiceAccount", "name": deployServiceAccount, "namespace": deployNamespace})

	// Ports: the flags, the container ports, the probes and the Service.
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	assert.Equal(t, fmt.Sprintf(":%d", ports["metrics"]), flags["metrics-bind-address"])
	assert.Equal(t, fmt.Sprintf(":%d", ports["probes"]), flags["health-probe-bind-address"])
	require.NotNil(t, c.LivenessProbe)
	require.NotNil(t, c.ReadinessProbe)
	assert.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)
	assert.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
	assert.Equal(t, "probes", c.LivenessProbe.HTTPGet.Port.String())
	assert.Equal(t, "probes", c.ReadinessProbe.HTTPGet.Port.String())
	svc := m.get(t, "Service", deployNamespace, "engine-metrics")
	svcPorts, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	require.Len(t, svcPorts, 1)
	assert.Equal(t, "metrics", svcPorts[0].(map[string]any)["targetPort"])
	selector, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
	assert.Equal(t, d.Spec.Selector.MatchLabels, selector)

	// Hardening.
	require.NotNil(t, pod.SecurityContext)
	require.NotNil(t, c.SecurityContext)
	assert.True(t, *pod.SecurityContext.RunAsNonRoot)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.SecurityContext.SeccompProfile.Type)
	assert.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)
	assert.False(t, *c.SecurityContext.AllowPrivilegeEscalation)
	assert.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		assert.Contains(t, c.Resources.Requests, r)
	}
	assert.Contains(t, c.Resources.Limits, corev1.ResourceMemory)

	// The templates as the kubelet mounts them are examples/templates, and
	// they vet.
	dir := m.mountedTemplates(t)
	if !assertSameTree(t, filepath.Join(repo, "examples/templates"), dir) {
		t.Log(regenerateConfig)
	}
	out, err := runEngine("vet", "--templates", dir)
	assert.NoError(t, err, out)
}

// TestDeployGCSKeyComponent renders config/ with the gcs-key component, as
// an overlay would: the key Secret is mounted where
// GOOGLE_APPLICATION_CREDENTIALS points.
func TestDeployGCSKeyComponent(t *testing.T) {
	overlay := t.TempDir()
	base, err := filepath.Rel(overlay, filepath.Join(repo, "config")) // kustomize wants relative paths
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(fmt.Sprintf(
		"resources:\n- %s\ncomponents:\n- %s\n", base, filepath.Join(base, "components/gcs-key"))), 0o644))
	d := renderConfig(t, overlay).deployment(t)
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	var keyPath string
	for _, e := range c.Env {
		if e.Name == "GOOGLE_APPLICATION_CREDENTIALS" {
			keyPath = e.Value
		}
	}
	require.NotEmpty(t, keyPath, "GOOGLE_APPLICATION_CREDENTIALS is set")
	var secret *corev1.SecretVolumeSource
	for _, m := range c.VolumeMounts {
		if m.MountPath != filepath.Dir(keyPath) {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name == m.Name {
				secret = v.Secret
			}
		}
	}
	require.NotNil(t, secret, "a Secret volume is mounted at %s", filepath.Dir(keyPath))
	assert.Equal(t, "engine-gcs-key", secret.SecretName, "the Secret docs/operations.md tells to create")
	assert.Empty(t, secret.Items)
	assert.Equal(t, "key.json", filepath.Base(keyPath), "the key of the Secret docs/operations.md tells to create")
	require.NotNil(t, pod.SecurityContext.FSGroup, "the nonroot user can read the 0440 key file")
	assert.Equal(t, *pod.SecurityContext.RunAsUser, *pod.SecurityContext.FSGroup)
	assert.Len(t, pod.Containers, 1, "the patch adds to the engine container")
}

// TestDeployApply applies the rendered manifests to the cluster and runs
// the Deployment's command as its ServiceAccount. The cluster is shared
// with the other tests: the CRDs (which other tests install and use) are
// applied with a server-side dry run, everything else for real and removed
// afterwards. The Deployment's pods run on the fake node, which pulls no
// image: what they prove is that the apiserver admits them into the
// namespace enforcing the restricted Pod Security Standard.
func TestDeployApply(t *testing.T) {
	m := renderConfig(t, filepath.Join(repo, "config"))
	var crds, deployments, rest []*unstructured.Unstructured
	for _, o := range m.objs {
		switch o.GetKind() {
		case "CustomResourceDefinition":
			crds = append(crds, o)
		case "Deployment":
			deployments = append(deployments, o)
		default:
			rest = append(rest, o)
		}
	}
	lease := &unstructured.Unstructured{}
	lease.SetAPIVersion("coordination.k8s.io/v1")
	lease.SetKind("Lease")
	lease.SetNamespace(deployNamespace)
	lease.SetName("engine.cuengine.dev") // taken by the engine run below
	removeAfterwards(t, append(append(rest, deployments...), lease))

	out := kubectlStdin(t, manifest(t, crds), "apply", "--server-side", "--dry-run=server", "--force-conflicts", "-f", "-")
	assert.Equal(t, len(crds), strings.Count(out, "serverside-applied (server dry run)"), out)
	out = kubectlStdin(t, manifest(t, rest), "apply", "--server-side", "-f", "-")
	assert.Equal(t, len(rest), strings.Count(out, "serverside-applied"), out)
	assert.Equal(t, "restricted", kubectl(t, "get", "namespace", deployNamespace, "-o", `jsonpath={.metadata.labels.pod-security\.kubernetes\.io/enforce}`))
	out = kubectlStdin(t, manifest(t, deployments), "apply", "--server-side", "-f", "-")
	assert.Contains(t, out, "deployment.apps/engine serverside-applied")
	assert.NotContains(t, out, "PodSecurity", "the namespace warns on pods that break the restricted standard")
	assertPodsAdmitted(t, deployNamespace, "engine", 2)

	// That check is live: a root container would be reported, and its pod
	// refused.
	insecure := deployments[0].DeepCopy()
	require.NoError(t, unstructured.SetNestedField(insecure.Object, false, "spec", "template", "spec", "securityContext", "runAsNonRoot"))
	out = kubectlStdin(t, manifest(t, []*unstructured.Unstructured{insecure}), "apply", "--server-side", "--dry-run=server", "-f", "-")
	assert.Contains(t, out, `would violate PodSecurity "restricted:`)
	assertPodRefused(t, deployNamespace, insecure)

	// The container's arguments, with the templates mounted from the
	// ConfigMap, against the cluster as the ServiceAccount. Only the
	// addresses change, and --namespace keeps the engine off the other
	// tests' objects.
	ns := namespace(t)
	t.Cleanup(func() { _, _ = kubectlErr("delete", "namespace", ns, "--wait=false") })
	metrics := freeAddr(t)
	c := m.deployment(t).Spec.Template.Spec.Containers[0]
	// The engine keeps this test's revisions in a namespace of its own
	// (startEngine's --revision-namespace): the Role there too, which it
	// has no rights in until then.
	sa := "system:serviceaccount:" + deployNamespace + ":" + deployServiceAccount
	assertCan(t, sa, false, "list", "controllerrevisions.apps", "-n", revisionNamespace(t))
	grantRevisions(t, m.get(t, "Role", deployNamespace, "engine"), revisionNamespace(t))
	eng := startEngine(t, m.mountedTemplates(t), containerArgs(t, c, ns, metrics)...)
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
		code, body := httpGet(t, "http://"+eng.probe+p.HTTPGet.Path)
		assert.Equal(t, http.StatusOK, code, "%s: %s", p.HTTPGet.Path, body)
	}
	eventually(t, "the engine (leader) to install the CRDs", time.Minute, func(ctx context.Context) (bool, error) {
		_, err := kubectlErr("wait", "--for=condition=Established", "--timeout=5s", "crd/mykinds.webapp.my.domain")
		return err == nil, nil
	})
	assertRights(t, sa, deployNamespace, deployNamespace, true)

	kubectlApply(t, ns, "apiVersion: webapp.my.domain/v1\nkind: MyKind\nmetadata: {name: deployed}\nspec: {deploymentName: deployed-web}\n")
	eventually(t, "the MyKind to be Ready", time.Minute, func(ctx context.Context) (bool, error) {
		out, err := kubectlErr("-n", ns, "get", "mykind", "deployed", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True", err
	})
	assert.NotContains(t, eng.log.String(), "forbidden", "the committed role covers what the engine does")

	// The metrics are served over HTTPS to a token allowed to read them
	// (the ClusterRole engine-metrics-reader), and to no one else; those
	// the dashboard and the alerts of config/components/monitoring query
	// are there.
	body := assertMetricsGuarded(t, metrics, ns, "engine-metrics-reader")
	assertMonitoredMetricsServed(t, body)
	for _, sample := range []string{"engine_template_reload_healthy 1", `leader_election_master_status{name="engine.cuengine.dev"} 1`} {
		assert.Contains(t, body, sample)
	}
}

// containerArgs are the engine container's arguments for the engine run
// here, against the cluster as the ServiceAccount: only the addresses
// change, and --namespace keeps the engine off the other tests' objects.
func containerArgs(t *testing.T, c corev1.Container, ns, metrics string) []string {
	t.Helper()
	require.Equal(t, "run", c.Args[0])
	args := []string{"--kubeconfig", serviceAccountToken(t), "--namespace", ns}
	for _, a := range c.Args[1:] {
		switch name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "="); name {
		case "templates", "health-probe-bind-address": // set by startEngine
		case "metrics-bind-address":
			args = append(args, "--metrics-bind-address="+metrics)
		default:
			args = append(args, a)
		}
	}
	return args
}

// deployManifests are the objects `kubectl kustomize` rendered.
type deployManifests struct {
	objs []*unstructured.Unstructured
}

// renderConfig runs `kubectl kustomize dir`.
func renderConfig(t *testing.T, dir string) *deployManifests {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "kubectl"), "kustomize", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "kubectl kustomize %s: %s", dir, stderr.String())
	return parseManifests(t, out)
}

// parseManifests reads a multi-document YAML stream of objects.
func parseManifests(t *testing.T, out []byte) *deployManifests {
	t.Helper()
	m := &deployManifests{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		u := &unstructured.Unstructured{}
		require.NoError(t, yaml.Unmarshal(doc, &u.Object))
		if len(u.Object) > 0 {
			m.objs = append(m.objs, u)
		}
	}
	return m
}

func (m *deployManifests) keys() []string {
	var out []string
	for _, o := range m.objs {
		out = append(out, o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName())
	}
	return out
}

func (m *deployManifests) get(t *testing.T, kind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range m.objs {
		if o.GetKind() == kind && o.GetNamespace() == ns && o.GetName() == name {
			return o
		}
	}
	require.Failf(t, "missing object", "%s %s/%s is not in the rendered manifests", kind, ns, name)
	return nil
}

func (m *deployManifests) deployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(m.get(t, "Deployment", deployNamespace, "engine").Object, d))
	return d
}

// mountedTemplates writes into a fresh directory the files the kubelet
// mounts at the --templates directory of the engine container: the
// ConfigMap's keys, placed by the volume's items.
func (m *deployManifests) mountedTemplates(t *testing.T) string {
	t.Helper()
	pod := m.deployment(t).Spec.Template.Spec
	templates := parseFlags(pod.Containers[0].Args[1:])["templates"]
	require.NotEmpty(t, templates, "engine run --templates")
	var vol *corev1.Volume
	for _, mount := range pod.Containers[0].VolumeMounts {
		if mount.MountPath != templates {
			continue
		}
		require.Empty(t, mount.SubPath, "a subPath mount never sees ConfigMap updates")
		for i := range pod.Volumes {
			if pod.Volumes[i].Name == mount.Name {
				vol = &pod.Volumes[i]
			}
		}
	}
	require.NotNil(t, vol, "a volume is mounted at %s", templates)
	require.NotNil(t, vol.ConfigMap, "the templates volume is a ConfigMap")
	cm := &corev1.ConfigMap{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(m.get(t, "ConfigMap", deployNamespace, vol.ConfigMap.Name).Object, cm))
	items := vol.ConfigMap.Items
	if len(items) == 0 {
		for k := range cm.Data {
			items = append(items, corev1.KeyToPath{Key: k, Path: k})
		}
	}
	projected := map[string]bool{}
	dir := t.TempDir()
	for _, it := range items {
		data, ok := cm.Data[it.Key]
		require.True(t, ok, "volume item %q is a key of ConfigMap %s", it.Key, cm.Name)
		projected[it.Key] = true
		path := filepath.Join(dir, filepath.FromSlash(it.Path))
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(data), 0o644))
	}
	for k := range cm.Data {
		assert.True(t, projected[k], "ConfigMap key %q has no item in the templates volume (config/deployment.yaml), so it is not mounted", k)
	}
	return dir
}

// assertSameTree compares every file under two directories and reports
// whether they hold the same.
func assertSameTree(t *testing.T, want, got string) bool {
	t.Helper()
	w, g := readTree(t, want), readTree(t, got)
	var names []string
	for n := range w {
		names = append(names, n)
	}
	for n := range g {
		if _, ok := w[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	same := true
	for _, n := range names {
		switch wb, ok := w[n]; {
		case !ok:
			t.Errorf("%s is mounted but not in %s", n, want)
		case g[n] == nil:
			t.Errorf("%s is not mounted", n)
		case !bytes.Equal(wb, g[n]):
			t.Errorf("the mounted %s differs from %s at %s", n, filepath.Join(want, n), firstDifference(string(g[n]), string(wb)))
		default:
			continue
		}
		same = false
	}
	return same
}

// readTree reads the files of a templates directory, without the
// templates' test cases (tests/), which are not deployed.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(dir, p)
		if err == nil && d.IsDir() && rel == "tests" {
			return filepath.SkipDir
		}
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = b
		return err
	}))
	return out
}

// firstDifference names the first line where got and want differ.
func firstDifference(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl || i >= len(g) || i >= len(w) {
			return fmt.Sprintf("line %d:\n  has:  %q\n  want: %q", i+1, gl, wl)
		}
	}
	return "(no difference)"
}

// parseFlags maps the --name=value and --name value flags of args to their
// values ("" for a flag without one).
func parseFlags(args []string) map[string]string {
	out := map[string]string{}
	for i := 0; i < len(args); i++ {
		name, ok := strings.CutPrefix(args[i], "--")
		if !ok {
			continue
		}
		if n, v, found := strings.Cut(name, "="); found {
			out[n] = v
		} else if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			out[name] = args[i+1]
			i++
		} else {
			out[name] = ""
		}
	}
	return out
}

func manifest(t *testing.T, objs []*unstructured.Unstructured) string {
	t.Helper()
	var docs []string
	for _, o := range objs {
		b, err := yaml.Marshal(o.Object)
		require.NoError(t, err)
		docs = append(docs, string(b))
	}
	return strings.Join(docs, "---\n")
}

// kubectlStdin runs kubectl with a manifest on its standard input and
// returns its combined output.
func kubectlStdin(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", cluster.Kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "kubectl %s: %s", strings.Join(args, " "), out)
	return string(out)
}

// kubectlName is how kubectl names an object: resource.group/name.
func kubectlName(o *unstructured.Unstructured) string {
	gvk := o.GroupVersionKind()
	res := strings.ToLower(gvk.Kind)
	if gvk.Group != "" {
		res += "." + gvk.Group
	}
	return res + "/" + o.GetName()
}

// removeAfterwards deletes, when the test ends, those of objs that do not
// exist now: what the test is about to create, not what other tests left
// for themselves. A namespace is deleted last and waited for, so a later
// test can create it again.
func removeAfterwards(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	var created []*unstructured.Unstructured
	nsCreated := false
	for _, o := range objs {
		args := []string{"get", kubectlName(o), "--ignore-not-found", "-o", "name"}
		if o.GetNamespace() != "" {
			args = append(args, "-n", o.GetNamespace())
		}
		if strings.TrimSpace(kubectl(t, args...)) != "" {
			continue
		}
		if o.GetKind() == "Namespace" && o.GetName() == deployNamespace {
			nsCreated = true
		}
		created = append(created, o)
	}
	t.Cleanup(func() {
		for i := len(created) - 1; i >= 0; i-- {
			o := created[i]
			if o.GetNamespace() == deployNamespace && nsCreated {
				continue // goes with the namespace
			}
			args := []string{"delete", kubectlName(o), "--ignore-not-found", "--wait", "--timeout=2m"}
			if o.GetNamespace() != "" {
				args = append(args, "-n", o.GetNamespace())
			}
			if out, err := kubectlErr(args...); err != nil {
				t.Errorf("cleanup: kubectl %s: %v: %s", strings.Join(args, " "), err, out)
			}
		}
	})
}

// serviceAccountToken writes a kubeconfig that authenticates as the
// engine's ServiceAccount with a short-lived token, as in its pod.
func serviceAccountToken(t *testing.T) string {
	t.Helper()
	token := strings.TrimSpace(kubectl(t, "-n", deployNamespace, "create", "token", deployServiceAccount, "--duration=1h"))
	cfg, err := clientcmd.LoadFromFile(cluster.Kubeconfig)
	require.NoError(t, err)
	cfg.AuthInfos = map[string]*clientcmdapi.AuthInfo{deployServiceAccount: {Token: token}}
	for _, c := range cfg.Contexts {
		c.AuthInfo = deployServiceAccount
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// assertPodsAdmitted waits until the Deployment's pods exist and are Ready
// on the fake node: the apiserver admitted them under the namespace's Pod
// Security enforcement.
func assertPodsAdmitted(t *testing.T, ns, deployment string, replicas int) {
	t.Helper()
	kubectl(t, "-n", ns, "wait", "--for=condition=Available", "--timeout=2m", "deployment/"+deployment)
	ready := kubectl(t, "-n", ns, "get", "pods", "-l", "app.kubernetes.io/name=engine,app.kubernetes.io/component=controller",
		"-o", `jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status} {end}`)
	assert.Equal(t, slices.Repeat([]string{"True"}, replicas), strings.Fields(ready), "the pods are admitted and Ready")
	events := kubectl(t, "-n", ns, "get", "events", "--field-selector", "reason=FailedCreate", "-o", "name")
	assert.Empty(t, strings.TrimSpace(events), "no pod was refused")
}

// assertPodRefused: a pod with the Deployment's pod template is refused
// by the namespace's enforced restricted Pod Security Standard (a server
// dry run: the apiserver admits or refuses as for a real create).
func assertPodRefused(t *testing.T, ns string, d *unstructured.Unstructured) {
	t.Helper()
	spec, _, err := unstructured.NestedMap(d.Object, "spec", "template", "spec")
	require.NoError(t, err)
	pod := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "insecure", "namespace": ns}, "spec": spec}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), "--kubeconfig", cluster.Kubeconfig, "create", "--dry-run=server", "-f", "-")
	cmd.Stdin = strings.NewReader(manifest(t, []*unstructured.Unstructured{pod}))
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "a root pod is created in %s: %s", ns, out)
	assert.Contains(t, string(out), `violates PodSecurity "restricted:latest"`)
}

// grantRevisions copies the engine's Role and its binding into ns, as for
// an engine run with --revision-namespace ns (engine rbac
// --revision-namespace does the same), and removes them afterwards.
func grantRevisions(t *testing.T, role *unstructured.Unstructured, ns string) {
	t.Helper()
	r := role.DeepCopy()
	r.SetNamespace(ns)
	r.SetResourceVersion("")
	r.SetUID("")
	binding := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
		"metadata": map[string]any{"name": r.GetName(), "namespace": ns},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": r.GetName()},
		"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": deployServiceAccount, "namespace": deployNamespace}},
	}}
	kubectlStdin(t, manifest(t, []*unstructured.Unstructured{r, binding}), "apply", "-f", "-")
	t.Cleanup(func() { _, _ = kubectlErr("-n", ns, "delete", "role,rolebinding", r.GetName(), "--ignore-not-found") })
}
