package e2e

// The Helm chart in charts/engine (docs/operations.md): it renders what
// config/ renders, installs into the full cluster with its Deployment
// available on the fake node, its arguments and role serve the templates,
// and an upgrade with a changed template changes the templates ConfigMap
// and nothing else.

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// helmRelease is the release name that gives the chart's objects the names
// of config/ (engine, engine-templates, engine-metrics).
const helmRelease = "engine"

// helmLabels are the labels Helm charts conventionally carry and config/
// does not (its generated rbac.yaml says app.kubernetes.io/managed-by:
// engine instead). They are the one intended difference in the objects the
// two render, so the comparison drops them wherever they occur, selectors
// included.
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/instance", "app.kubernetes.io/version", "app.kubernetes.io/managed-by"}

// TestHelmMatchesKustomize renders the chart and config/ (with its
// components, against the chart's matching values) and compares the
// objects of the same kind and name. Intended differences:
//   - the Helm labels above;
//   - the Namespace: a Helm release goes into a namespace it does not own
//     (`helm install -n engine-system --create-namespace`), while config/
//     creates engine-system with the restricted Pod Security Standard;
//   - the order of env, volumes and volumeMounts, which kustomize's patch
//     changes (the gcs-key component's come first): compared by name.
func TestHelmMatchesKustomize(t *testing.T) {
	for _, c := range []struct {
		name       string
		components []string
		set        []string
	}{
		{"defaults", nil, nil},
		{"every option", []string{"components/gcs-key", "components/monitoring", "components/sharding", "components/clusters"},
			[]string{"gcs.keySecret=engine-gcs-key", "dashboard.enabled=true", "prometheusRule.enabled=true", "sharding.enabled=true", "replicaCount=3", "clusters.namespace=engine-system"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			kustomized := renderConfig(t, overlay(t, c.components...))
			charted := renderChart(t, c.set...)
			byKey := func(m *deployManifests) map[string]*unstructured.Unstructured {
				out := map[string]*unstructured.Unstructured{}
				for _, o := range m.objs {
					out[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = o
				}
				return out
			}
			k, h := byKey(kustomized), byKey(charted)
			require.Contains(t, k, "Namespace//"+deployNamespace)
			delete(k, "Namespace//"+deployNamespace)
			assert.ElementsMatch(t, slices.Collect(maps.Keys(k)), slices.Collect(maps.Keys(h)), "the same objects")
			for key, want := range k {
				if got, ok := h[key]; ok {
					assert.Equal(t, withoutHelmLabels(want.Object), withoutHelmLabels(got.Object), "%s: the chart renders what config/ does", key)
				}
			}
		})
	}
}

// TestHelmRefusesBadValues: mistakes in values fail the install with a
// message, instead of deploying an engine that cannot serve.
func TestHelmRefusesBadValues(t *testing.T) {
	mykind := filepath.Join(repo, "examples/templates/mykind.cue")
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"a misspelt value", []string{"--set", "replicas=3"}, "additional properties 'replicas' not allowed"},
		{"an unknown log format", []string{"--set", "logFormat=text"}, "at '/logFormat': value must be one of 'json', 'console'"},
		{"a clusters namespace that is no name", []string{"--set", "clusters.namespace=Engine_System"}, "at '/clusters/namespace': 'Engine_System' does not match pattern"},
		{"two templates with one base name", []string{"--set-file", `templates.files.a/x\.cue=` + mykind, "--set-file", `templates.files.b/x\.cue=` + mykind},
			"templates.files: two files are named x.cue; ConfigMap keys are base names, so they must differ"},
		{"a role that is not engine rbac's", []string{"--set", "rbac.generated=kind: Role"},
			"rbac.generated holds no ClusterRole and Role with rules: give it the output of `engine rbac --templates DIR --install-crds`"},
		{"a webhook configuration the role does not grant", []string{"--set", "webhook.configurationName=team-b.cuengine.dev"},
			"rbac.generated does not grant the ValidatingWebhookConfiguration team-b.cuengine.dev (webhook.configurationName): generate it with `engine rbac --webhook-configuration team-b.cuengine.dev --webhook-secret engine-webhook-certs`"},
		{"a webhook Secret the role does not grant", []string{"--set", "webhook.secretName=team-b-webhook-certs"},
			"rbac.generated does not grant the Secret team-b-webhook-certs (webhook.secretName)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"template", helmRelease, filepath.Join(repo, "charts/engine")}, c.args...)
			out, err := exec.Command(filepath.Join(bin, "helm"), args...).CombinedOutput()
			require.Error(t, err, "helm template %s: %s", strings.Join(c.args, " "), out)
			assert.Contains(t, string(out), c.want)
		})
	}
}

// TestHelmSecondRelease: a second release of the chart (another team's
// templates, in its own namespace) names its own ValidatingWebhookConfiguration
// and certificates Secret, which are cluster-wide and namespaced by name
// respectively; the engine is told them and the role engine rbac
// generates for them grants exactly them. Two releases with the default
// would both manage engine.cuengine.dev.
func TestHelmSecondRelease(t *testing.T) {
	roleFile := filepath.Join(t.TempDir(), "rbac.yaml")
	role, err := exec.Command(filepath.Join(bin, "engine"), "rbac", "--templates", filepath.Join(repo, "examples/templates"), "--install-crds",
		"--namespace", "team-b", "--webhook-configuration", "team-b.cuengine.dev", "--webhook-secret", "team-b-webhook-certs").Output()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(roleFile, role, 0o644))
	out, err := exec.Command(filepath.Join(bin, "helm"), "template", "team-b", filepath.Join(repo, "charts/engine"), "--namespace", "team-b",
		"--set", "webhook.configurationName=team-b.cuengine.dev,webhook.secretName=team-b-webhook-certs", "--set-file", "rbac.generated="+roleFile).CombinedOutput()
	require.NoError(t, err, "%s", out)
	m := parseManifests(t, out)
	var args []string
	var vwcNames, secretNames []string
	for _, o := range m.objs {
		switch o.GetKind() {
		case "Deployment":
			d := &appsv1.Deployment{}
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, d))
			args = d.Spec.Template.Spec.Containers[0].Args
		case "ClusterRole", "Role":
			rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
			for _, r := range rules {
				r := r.(map[string]any)
				names, _, _ := unstructured.NestedStringSlice(r, "resourceNames")
				resources, _, _ := unstructured.NestedStringSlice(r, "resources")
				switch {
				case slices.Contains(resources, "validatingwebhookconfigurations"):
					vwcNames = append(vwcNames, names...)
				case slices.Contains(resources, "secrets"):
					secretNames = append(secretNames, names...)
				}
			}
		}
	}
	assert.Contains(t, args, "--webhook-configuration=team-b.cuengine.dev")
	assert.Contains(t, args, "--webhook-secret=team-b-webhook-certs")
	assert.Equal(t, []string{"team-b.cuengine.dev"}, vwcNames, "the role names the release's configuration only")
	assert.Contains(t, secretNames, "team-b-webhook-certs")
	assert.NotContains(t, secretNames, "engine-webhook-certs")
}

// TestHelmInstall installs the chart into the full cluster, runs the
// engine with the installed Deployment's arguments, templates and
// ServiceAccount, and upgrades the release with a changed template. The
// cluster is shared: like TestDeployApply, the release takes engine-system
// and the cluster-wide names of config/ (ClusterRole engine), and removes
// them afterwards; the CRDs stay (Helm never deletes a chart's crds/, and
// other tests use them).
func TestHelmInstall(t *testing.T) {
	helm := helmCommand(t)
	existed := strings.TrimSpace(kubectl(t, "get", "namespace", deployNamespace, "--ignore-not-found", "-o", "name")) != ""
	t.Cleanup(func() {
		if out, err := helm("uninstall", helmRelease, "-n", deployNamespace, "--wait", "--timeout=2m"); err != nil {
			t.Errorf("cleanup: helm uninstall: %v: %s", err, out)
		}
		if !existed {
			if out, err := kubectlErr("delete", "namespace", deployNamespace, "--wait", "--timeout=2m"); err != nil {
				t.Errorf("cleanup: deleting namespace %s: %v: %s", deployNamespace, err, out)
			}
		}
	})

	// Into a namespace that enforces the restricted Pod Security Standard:
	// the apiserver refuses any pod of the release that breaks it.
	if !existed {
		kubectl(t, "create", "namespace", deployNamespace)
	}
	kubectl(t, "label", "namespace", deployNamespace, "--overwrite", "pod-security.kubernetes.io/enforce=restricted")

	start := time.Now()
	out, err := helm("install", helmRelease, filepath.Join(repo, "charts/engine"), "-n", deployNamespace, "--wait", "--timeout=3m")
	require.NoError(t, err, "helm install: %s", out)
	t.Logf("helm install --wait: the Deployment available in %s", time.Since(start).Round(100*time.Millisecond))
	kubectl(t, "-n", deployNamespace, "wait", "--for=condition=Available", "--timeout=10s", "deployment/engine")
	nodes := kubectl(t, "-n", deployNamespace, "get", "pods", "-l", "app.kubernetes.io/name=engine",
		"-o", `jsonpath={range .items[*]}{.spec.nodeName}={.status.conditions[?(@.type=="Ready")].status} {end}`)
	assert.Equal(t, []string{"kwok-node-0=True", "kwok-node-0=True"}, strings.Fields(nodes), "both replicas Ready on the fake node, without pulling the image")
	assertPodsAdmitted(t, deployNamespace, "engine", 2)

	// The installed Deployment's arguments, with its templates as the
	// kubelet mounts them, as its ServiceAccount.
	live := liveRelease(t, helm)
	assertSameTree(t, filepath.Join(repo, "examples/templates"), live.mountedTemplates(t))
	ns := namespace(t)
	t.Cleanup(func() { _, _ = kubectlErr("delete", "namespace", ns, "--wait=false") })
	c := live.deployment(t).Spec.Template.Spec.Containers[0]
	metrics := freeAddr(t)
	grantRevisions(t, live.get(t, "Role", deployNamespace, "engine"), revisionNamespace(t))
	eng := startEngine(t, live.mountedTemplates(t), containerArgs(t, c, ns, metrics)...)
	kubectlApply(t, ns, "apiVersion: webapp.my.domain/v1\nkind: MyKind\nmetadata: {name: charted}\nspec: {deploymentName: charted-web}\n")
	eventually(t, "the MyKind to be Ready", time.Minute, func(ctx context.Context) (bool, error) {
		out, err := kubectlErr("-n", ns, "get", "mykind", "charted", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return out == "True", err
	})
	assert.NotContains(t, eng.log.String(), "forbidden", "the chart's role covers what the engine does")
	assertMetricsGuarded(t, metrics, ns, helmRelease+"-metrics-reader")

	// helm upgrade with one template changed: the ConfigMap is updated in
	// place (the engine hot-reloads it) and nothing else is written, so the
	// pods are not restarted.
	before := resourceVersions(t, live)
	changed := map[string]string{}
	for path, content := range readTree(t, filepath.Join(repo, "examples/templates")) {
		changed[path] = string(content)
	}
	changed["mykind.cue"] += "\n// changed by TestHelmInstall\n"
	values, err := yaml.Marshal(map[string]any{"templates": map[string]any{"files": changed}})
	require.NoError(t, err)
	valuesFile := filepath.Join(t.TempDir(), "values.yaml")
	require.NoError(t, os.WriteFile(valuesFile, values, 0o644))
	out, err = helm("upgrade", helmRelease, filepath.Join(repo, "charts/engine"), "-n", deployNamespace, "-f", valuesFile, "--wait", "--timeout=2m")
	require.NoError(t, err, "helm upgrade: %s", out)
	after := resourceVersions(t, liveRelease(t, helm))
	templatesKey := "ConfigMap/" + deployNamespace + "/engine-templates"
	assert.NotEqual(t, before[templatesKey], after[templatesKey], "the templates ConfigMap is updated")
	delete(before, templatesKey)
	delete(after, templatesKey)
	assert.Equal(t, before, after, "nothing but the templates ConfigMap changes")
	cm := kubectl(t, "-n", deployNamespace, "get", "configmap", "engine-templates", "-o", `go-template={{index .data "mykind.cue"}}`)
	assert.Equal(t, changed["mykind.cue"], cm)
}

// helmCommand returns a runner of bin/helm against the cluster, with its
// own configuration, cache and data directories.
func helmCommand(t *testing.T) func(args ...string) (string, error) {
	t.Helper()
	path := filepath.Join(bin, "helm")
	_, err := os.Stat(path)
	require.NoError(t, err, "bin/helm is built by `make assets`")
	home := t.TempDir()
	return func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, path, append([]string{"--kubeconfig", cluster.Kubeconfig}, args...)...)
		cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home+"/config", "HELM_CACHE_HOME="+home+"/cache", "HELM_DATA_HOME="+home+"/data")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
}

// renderChart runs `helm template` for the release engine in engine-system,
// CRDs included.
func renderChart(t *testing.T, set ...string) *deployManifests {
	t.Helper()
	args := []string{"template", helmRelease, filepath.Join(repo, "charts/engine"), "--namespace", deployNamespace, "--include-crds"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	cmd := exec.Command(filepath.Join(bin, "helm"), args...)
	out, err := cmd.Output()
	var stderr string
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = string(ee.Stderr)
	}
	require.NoError(t, err, "helm template: %s", stderr)
	return parseManifests(t, out)
}

// overlay writes a kustomization of config/ in engine-system with the given
// components of config/, as a user's overlay would.
func overlay(t *testing.T, components ...string) string {
	t.Helper()
	dir := t.TempDir()
	base, err := filepath.Rel(dir, filepath.Join(repo, "config")) // kustomize wants relative paths
	require.NoError(t, err)
	k := fmt.Sprintf("namespace: %s\nresources:\n- %s\n", deployNamespace, base)
	if len(components) > 0 {
		k += "components:\n"
		for _, c := range components {
			k += "- " + filepath.Join(base, c) + "\n"
		}
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644))
	return dir
}

// withoutHelmLabels returns a copy of an object without the Helm labels,
// and with its lists of named env variables, volumes and mounts in name
// order.
func withoutHelmLabels(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			if slices.Contains(helmLabels, k) {
				continue
			}
			e = withoutHelmLabels(e)
			if list, ok := e.([]any); ok && (k == "env" || k == "volumes" || k == "volumeMounts") {
				slices.SortFunc(list, func(a, b any) int {
					return strings.Compare(fmt.Sprint(a.(map[string]any)["name"]), fmt.Sprint(b.(map[string]any)["name"]))
				})
			}
			out[k] = e
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = withoutHelmLabels(e)
		}
		return out
	}
	return v
}

// liveRelease reads the objects of the installed release from the cluster.
func liveRelease(t *testing.T, helm func(args ...string) (string, error)) *deployManifests {
	t.Helper()
	out, err := helm("get", "manifest", helmRelease, "-n", deployNamespace)
	require.NoError(t, err, "helm get manifest: %s", out)
	rendered := parseManifests(t, []byte(out))
	require.NotEmpty(t, rendered.objs)
	live := &deployManifests{}
	for _, o := range rendered.objs {
		args := []string{"get", kubectlName(o), "-o", "json"}
		if o.GetNamespace() != "" {
			args = append(args, "-n", o.GetNamespace())
		}
		u := &unstructured.Unstructured{}
		require.NoError(t, u.UnmarshalJSON([]byte(kubectl(t, args...))))
		live.objs = append(live.objs, u)
	}
	return live
}

// resourceVersions maps each object to its resourceVersion.
func resourceVersions(t *testing.T, m *deployManifests) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, o := range m.objs {
		out[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = o.GetResourceVersion()
	}
	require.Contains(t, out, "Deployment/"+deployNamespace+"/engine")
	return out
}

// TestHelmSetsGOMEMLIMIT: the chart keeps the Go heap to nine tenths of the
// container's memory limit when the limit is in Mi or Gi (the rest is for
// the stacks, the runtime and the plugins, in the same container); any
// other limit it leaves to the engine, which takes nine tenths of what its
// cgroup says (--memory-limit-ratio, TestMemoryLimitFromTheContainer).
// --max-evaluation-heap defaults to three quarters of it.
func TestHelmSetsGOMEMLIMIT(t *testing.T) {
	for _, c := range []struct {
		name, limit string
		want        *corev1.EnvVar // nil: no GOMEMLIMIT
	}{
		{"the default 512Mi", "", &corev1.EnvVar{Name: "GOMEMLIMIT", Value: "460MiB"}},
		{"in Gi", "2Gi", &corev1.EnvVar{Name: "GOMEMLIMIT", Value: "1843MiB"}},
		{"in M", "800M", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var set []string
			if c.limit != "" {
				set = append(set, "resources.limits.memory="+c.limit)
			}
			var env []corev1.EnvVar
			found := false
			for _, o := range renderChart(t, set...).objs {
				if o.GetKind() == "Deployment" {
					found = true
					d := &appsv1.Deployment{}
					require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, d))
					env = d.Spec.Template.Spec.Containers[0].Env
				}
			}
			require.True(t, found, "the chart renders the engine's Deployment")
			if c.want != nil {
				assert.Contains(t, env, *c.want)
				return
			}
			for _, e := range env {
				assert.NotEqual(t, "GOMEMLIMIT", e.Name, "left to the engine")
			}
		})
	}
}
