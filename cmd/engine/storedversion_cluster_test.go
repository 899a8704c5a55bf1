package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/internal/localcluster"
)

// TestRemovingAStoredVersionIsRefusedOnCluster: a template edit that drops
// a version objects may still be stored in is refused, naming how many
// objects of the kind exist and where their migration stands: first v1
// while it is still the storage version (nothing migrated), then v1 after
// a migration to v2 that could not finish (one App in v1 does not convert
// to v2 once the hub's bound is lowered). The CRD keeps serving v1
// throughout.
func TestRemovingAStoredVersionIsRefusedOnCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane (run without -short)")
	}
	cluster, err := localcluster.Start(context.Background(), localcluster.Options{Progress: os.Stderr})
	require.NoError(t, err, "starting the control plane (run `make assets` first)")
	t.Cleanup(func() { assert.NoError(t, cluster.Stop()) })
	c, err := client.New(cluster.Config, client.Options{Scheme: newScheme()})
	require.NoError(t, err)
	ctx := context.Background()
	for _, ns := range []string{"engine-system", "apps"} {
		require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}

	tmpl := t.TempDir()
	require.NoError(t, os.CopyFS(tmpl, os.DirFS("testdata/conversion")))
	appCUE := filepath.Join(tmpl, "app.cue")
	original, err := os.ReadFile(appCUE)
	require.NoError(t, err)
	edit(t, appCUE, "v2: storage: true", "v2: {}")
	edit(t, appCUE, "v1: {\n", "v1: {\n\t\tstorage: true\n")
	// The hub admits 20 replicas until the first edit below, so that app-3
	// is admitted (the webhook converts writes to the hub) and then stays
	// stored in v1 without converting.
	edit(t, appCUE, "replicas: *1 | int & >=0 & <=10", "replicas: *1 | int & >=0 & <=30")
	// Only v2, stored: the versions block gone.
	from, to := strings.Index(string(original), "versions: {"), strings.Index(string(original), "children: deployment:")
	require.Positive(t, from)
	require.Greater(t, to, from)
	onlyV2 := string(original[:from]) + string(original[to:])

	port := freePort(t)
	// The engine reconciles only engine-system, so that the Apps in apps
	// stay stored as they were created. Forced CRD changes let the hub's
	// bound narrow back to 10; a version still stored is refused all the
	// same.
	cmd := exec.Command(os.Args[0], "run", "--templates", tmpl, "--kubeconfig", cluster.Kubeconfig, "--install-crds", "--force-crd-changes", "--namespace", "engine-system",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		"--webhook-port", fmt.Sprint(port), "--webhook-url", fmt.Sprintf("https://localhost:%d", port),
		"--webhook-namespace", "engine-system", "--webhook-cert-dir", t.TempDir())
	cmd.Env = append(os.Environ(), asCLI+"=1")
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	var once sync.Once
	t.Cleanup(func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if t.Failed() {
				t.Logf("engine logs:\n%s", logs.String())
			}
		})
	})

	crd := &apiextensionsv1.CustomResourceDefinition{}
	eventuallyCluster(t, "the CRD installed, v1 stored", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Name: "apps.apps.example.com"}, crd); err != nil {
			return false, err
		}
		conv := crd.Spec.Conversion
		return conv != nil && conv.Webhook.ClientConfig != nil && len(conv.Webhook.ClientConfig.CABundle) > 0, nil
	})
	// Three Apps that convert, and one whose 20 replicas v2 will refuse.
	for i, replicas := range []int64{1, 2, 3, 20} {
		app := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps.example.com/v1", "kind": "App",
			"metadata": map[string]any{"name": fmt.Sprintf("app-%d", i), "namespace": "apps"},
			"spec":     map[string]any{"image": "nginx", "replicas": replicas},
		}}
		require.NoError(t, c.Create(ctx, app))
	}
	refusal := func(what string, want *regexp.Regexp) string {
		t.Helper()
		var found string
		eventuallyCluster(t, what, func(context.Context) (bool, error) {
			found = want.FindString(logs.String())
			return found != "", nil
		})
		return found
	}

	// v1, the storage version, dropped: nothing was migrated from it.
	require.NoError(t, os.WriteFile(appCUE, []byte(onlyV2), 0o644))
	msg := refusal("the refusal to drop the storage version", regexp.MustCompile(
		`CRD apps.apps.example.com not updated: objects may still be stored in v1 \(status.storedVersions v1\), which the template no longer declares: `+
			`4 App objects exist, any of which may be stored there; v1 is the live CRD's storage version, so nothing has been migrated from it: `+
			`first make another version the storage version with v1 still declared; keep v1 declared until the engine has migrated them`))
	t.Logf("refused: %s", msg)

	// v2 stored, v1 still declared: the migration cannot move app-3.
	require.NoError(t, os.WriteFile(appCUE, original, 0o644))
	eventuallyCluster(t, "the migration to v2 failed", func(ctx context.Context) (bool, error) {
		list := &eventsv1.EventList{}
		if err := c.List(ctx, list); err != nil {
			return false, err
		}
		for _, ev := range list.Items {
			if ev.Reason == "StorageMigrationFailed" && ev.Regarding.Name == "apps.apps.example.com" {
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: "apps.apps.example.com"}, crd))
	require.Equal(t, []string{"v1", "v2"}, crd.Status.StoredVersions)

	// v1 dropped now: refused, with the count and the failed migration.
	require.NoError(t, os.WriteFile(appCUE, []byte(onlyV2), 0o644))
	msg = refusal("the refusal to drop v1 after a failed migration", regexp.MustCompile(
		`CRD apps.apps.example.com not updated: objects may still be stored in v1 \(status.storedVersions v1, v2\), which the template no longer declares: `+
			`4 App objects exist, any of which may be stored there; the engine's last migration of it, at [0-9TZ:-]+, did not finish \(apps.apps.example.com: to v2 from v1,v2: [^"]*`))
	t.Logf("refused: %s", msg)
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: "apps.apps.example.com"}, crd))
	assert.Equal(t, []string{"v1", "v2"}, crd.Status.StoredVersions)
	var served []string
	for _, v := range crd.Spec.Versions {
		if v.Served {
			served = append(served, v.Name)
		}
	}
	assert.ElementsMatch(t, []string{"v1", "v2"}, served, "the CRD keeps serving v1")
}
