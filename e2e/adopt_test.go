package e2e

// Adoption by grant on the full cluster (docs/templates.md, "Adopting an
// existing object"; docs/operations.md, "Moving a Helm release under a
// template"): a Deployment made by the real `kubectl apply` and one
// installed by the real `helm install` become a parent's children when
// their owner runs the command the ChildConflict message gives, without a
// restart of their pods.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

var legacies = schema.GroupVersionResource{Group: "adopt.cuengine.dev", Version: "v1", Resource: "legacies"}

// legacyTemplate renders a Deployment as the ones below are: the template a
// team writes to take over what it already runs.
const legacyTemplate = `package legacy

parent: {
	apiVersion: "adopt.cuengine.dev/v1"
	kind:       "Legacy"
	spec: {
		image:    string
		replicas: int
		tier?:    string
	}
}
children: app: {
	apiVersion: "apps/v1"
	kind:       "Deployment"
	metadata: {
		name: parent.metadata.name
		if parent.spec.tier != _|_ {
			labels: tier: parent.spec.tier
		}
	}
	spec: {
		replicas: parent.spec.replicas
		selector: matchLabels: app: parent.metadata.name
		template: {
			metadata: labels: app: parent.metadata.name
			spec: containers: [{name: "app", image: parent.spec.image}]
		}
	}
}
`

// legacyDeployment is the Deployment kubectl applies and the chart
// installs: what the template renders, with tier: web.
const legacyDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  labels: {tier: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      containers: [{name: app, image: "registry.k8s.io/pause:3.9"}]
`

// TestAdoptionOfKubectlAndHelmDeployments: each Deployment, running two pods,
// is a ChildConflict whose message gives the grant command; once its owner
// runs it (and the engine reconcile it also gives), it is adopted: the
// same UID, pod template, ReplicaSet and pods, the previous manager gone
// from managedFields, controlled by the parent; then a template change that
// drops the tier label prunes it. The Helm release is then removed as
// docs/operations.md says, and the Deployment stays, still the parent's,
// with the same pods.
func TestAdoptionOfKubectlAndHelmDeployments(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "legacy.cue"), []byte(legacyTemplate), 0o644))
	installCRDs(t, dir)
	startEngine(t, dir)
	helm := helmCommand(t)

	for _, tc := range []struct {
		tool     string
		install  func(t *testing.T, ns, name string)
		previous string // its field manager
	}{
		{tool: "kubectl", previous: "kubectl-client-side-apply", install: func(t *testing.T, ns, name string) {
			kubectlApply(t, ns, fmt.Sprintf(legacyDeployment, name))
		}},
		{tool: "helm", previous: "helm", install: func(t *testing.T, ns, name string) {
			chart := t.TempDir()
			require.NoError(t, os.MkdirAll(filepath.Join(chart, "templates"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(chart, "Chart.yaml"), []byte("apiVersion: v2\nname: legacy\nversion: 0.1.0\n"), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(chart, "templates", "deployment.yaml"), []byte(fmt.Sprintf(legacyDeployment, name)), 0o644))
			out, err := helm("install", name, chart, "-n", ns)
			require.NoError(t, err, out)
		}},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			ctx := context.Background()
			ns := namespace(t)
			name := "from-" + tc.tool
			tc.install(t, ns, name)
			eventually(t, "two pods available", 60*time.Second, func(ctx context.Context) (bool, error) {
				d, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
				return err == nil && d.Status.AvailableReplicas == 2 && d.Status.ObservedGeneration == d.Generation, err
			})
			before, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			require.True(t, slices.ContainsFunc(before.ManagedFields, func(f metav1.ManagedFieldsEntry) bool { return f.Manager == tc.previous }), "made by %s", tc.previous)
			pods, sets := podsOf(ctx, t, ns, name), replicaSetsOf(ctx, t, ns, name)
			require.Len(t, pods, 2)

			// Without the grant: a conflict that says how to grant it.
			kubectlApply(t, ns, fmt.Sprintf("apiVersion: adopt.cuengine.dev/v1\nkind: Legacy\nmetadata: {name: %s}\nspec: {image: \"registry.k8s.io/pause:3.9\", replicas: 2, tier: web}\n", name))
			var msg string
			eventually(t, "Synced=False ChildConflict", 30*time.Second, func(ctx context.Context) (bool, error) {
				status, m, err := condition(ctx, legacies, ns, name, "Synced")
				msg = m
				return status == "False" && strings.HasPrefix(m, "ChildConflict: "), err
			})
			grantCmd := "kubectl annotate deployment.apps/" + name + " -n " + ns + " engine.cuengine.dev/adopt-by=Legacy.adopt.cuengine.dev/" + ns + "/" + name
			reconcileCmd := "engine reconcile legacy.adopt.cuengine.dev/" + name + " -n " + ns
			assert.Equal(t, "ChildConflict: Deployment "+ns+"/"+name+" exists and is not controlled by this Legacy (not created by the engine for it); it is left untouched. "+
				"To hand it over to this Legacy, its owner runs: "+grantCmd+"; then "+reconcileCmd+" adopts it", msg)
			unchanged, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, before.ResourceVersion, unchanged.ResourceVersion, "untouched without a grant")

			// The two commands of the message, as given.
			kubectl(t, strings.Fields(strings.TrimPrefix(grantCmd, "kubectl "))...)
			reconcile := exec.Command(filepath.Join(bin, "engine"), append(strings.Fields(strings.TrimPrefix(reconcileCmd, "engine ")), "--kubeconfig", cluster.Kubeconfig)...)
			out, err := reconcile.CombinedOutput()
			require.NoError(t, err, "%s: %s", reconcileCmd, out)
			eventually(t, "adopted: Synced=True", 30*time.Second, func(ctx context.Context) (bool, error) {
				status, _, err := condition(ctx, legacies, ns, name, "Synced")
				return status == "True", err
			})
			after, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, before.UID, after.UID, "the same Deployment")
			require.NotNil(t, metav1.GetControllerOf(after))
			assert.Equal(t, name, metav1.GetControllerOf(after).Name, "controlled by the parent")
			// Its generation moves: a Deployment's counts its annotations'
			// changes too (the grant, the engine's own), not a rollout.
			assert.Equal(t, before.Spec.Template, after.Spec.Template, "the pod template unchanged: no rollout")
			var managers []string
			for _, f := range after.ManagedFields {
				managers = append(managers, f.Manager)
			}
			assert.NotContains(t, managers, tc.previous, "the previous manager is gone: %v", managers)
			assert.Contains(t, managers, "engine")
			assert.NotContains(t, after.Annotations, "engine.cuengine.dev/adopt-by", "the grant is spent")
			assert.NotContains(t, after.Annotations, "kubectl.kubernetes.io/last-applied-configuration", "the client-side apply's record is pruned")
			assert.Equal(t, "web", after.Labels["tier"])

			// The pods stay: the same ReplicaSet, the same pods, while the
			// Deployment controller has seen the adoption.
			eventually(t, "the Deployment controller caught up", 30*time.Second, func(ctx context.Context) (bool, error) {
				d, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
				return err == nil && d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas == 2, err
			})
			assert.Equal(t, sets, replicaSetsOf(ctx, t, ns, name), "no new ReplicaSet")
			assert.Equal(t, pods, podsOf(ctx, t, ns, name), "the same pods")

			// A template change that drops the label prunes it.
			kubectl(t, "-n", ns, "patch", "legacy", name, "--type=json", "-p", `[{"op":"remove","path":"/spec/tier"}]`)
			eventually(t, "tier pruned", 30*time.Second, func(ctx context.Context) (bool, error) {
				d, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
				_, has := d.Labels["tier"]
				return err == nil && !has, err
			})

			if tc.tool == "helm" {
				// docs/operations.md: Helm forgets the release, its
				// objects stay. (helm uninstall would delete them, even
				// annotated helm.sh/resource-policy: keep: Helm reads that
				// from the release's stored manifest, not the live object.)
				kubectl(t, "delete", "secret", "-n", ns, "-l", "owner=helm,name="+name)
				out, err := helm("list", "-n", ns, "-q")
				require.NoError(t, err, out)
				assert.Empty(t, strings.TrimSpace(out), "no release left")
				out, err = helm("uninstall", name, "-n", ns)
				require.Error(t, err, "nothing for helm uninstall to delete: %s", out)
				assert.Contains(t, out, "not found")
				d, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
				require.NoError(t, err)
				assert.Equal(t, before.UID, d.UID, "the same Deployment")
				assert.Equal(t, name, metav1.GetControllerOf(d).Name, "still the parent's")
				assert.Equal(t, pods, podsOf(ctx, t, ns, name), "the same pods")
			}
		})
	}
}

// podsOf is the UIDs of a Deployment's pods (label app=name), by name.
func podsOf(ctx context.Context, t *testing.T, ns, name string) map[string]types.UID {
	t.Helper()
	list, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	require.NoError(t, err)
	out := map[string]types.UID{}
	for _, p := range list.Items {
		out[p.Name] = p.UID
	}
	return out
}

// replicaSetsOf is the UIDs of a Deployment's ReplicaSets, by name.
func replicaSetsOf(ctx context.Context, t *testing.T, ns, name string) map[string]types.UID {
	t.Helper()
	list, err := kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	require.NoError(t, err)
	out := map[string]types.UID{}
	for _, rs := range list.Items {
		out[rs.Name] = rs.UID
	}
	return out
}
