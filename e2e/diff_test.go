package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// engineDiff runs `engine diff` and returns its output and exit code.
func engineDiff(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "engine"), append([]string{"diff", "--kubeconfig", cluster.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if exitErr, ok := err.(*exec.ExitError); ok {
		return string(out), exitErr.ExitCode()
	}
	require.NoError(t, err, string(out))
	return string(out), 0
}

// TestDiffFleet: before a template edit goes live, engine diff shows what
// it would do to every existing parent, and writes nothing.
func TestDiffFleet(t *testing.T) {
	dir := templatesDir(t, "engine/testdata/templates/website.cue")
	installCRDs(t, dir)
	startEngine(t, dir)
	ns := namespace(t)
	for i := 0; i < 2; i++ {
		kubectlApply(t, ns, fmt.Sprintf("apiVersion: test.cuengine.dev/v1\nkind: Website\nmetadata: {name: site-%d}\nspec: {image: nginx:1.26, expose: %t}\n", i, i == 0))
	}
	eventually(t, "both Websites synced", 60*time.Second, func(ctx context.Context) (bool, error) {
		for i := 0; i < 2; i++ {
			status, _, err := condition(ctx, websitesGVR, ns, fmt.Sprintf("site-%d", i), "Synced")
			if err != nil || status != "True" {
				return false, err
			}
		}
		return true, nil
	})

	out, code := engineDiff(t, "--templates", dir)
	assert.Equal(t, 0, code, out)
	assert.Contains(t, out, "Website.test.cuengine.dev/v1: 2 parents: 7 unchanged")

	// The edit: a new port on the Service, no Ingress any more.
	src, err := os.ReadFile(filepath.Join(dir, "website.cue"))
	require.NoError(t, err)
	edited := strings.Replace(string(src), "ports: [{port: 80, targetPort: 80}]", "ports: [{port: 8080, targetPort: 80}]", 1)
	edited = strings.Replace(edited, "if parent.spec.expose {", "if false {", 1)
	require.NotEqual(t, string(src), edited)
	next := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(next, "website.cue"), []byte(edited), 0o644))

	before, err := kube.CoreV1().Services(ns).Get(context.Background(), "site-0", metav1.GetOptions{})
	require.NoError(t, err)
	out, code = engineDiff(t, "--templates", next)
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "--- live/Service "+ns+"/site-0")
	assert.Contains(t, out, "-  - port: 80")
	assert.Contains(t, out, "+  - port: 8080")
	assert.Contains(t, out, "Ingress "+ns+"/site-0 pruned")
	assert.Contains(t, out, "Website.test.cuengine.dev/v1: 2 parents: 2 changed, 1 pruned, 4 unchanged")

	// Only one parent, from a file.
	cr := filepath.Join(t.TempDir(), "cr.yaml")
	require.NoError(t, os.WriteFile(cr, []byte("apiVersion: test.cuengine.dev/v1\nkind: Website\nmetadata: {name: site-1, namespace: "+ns+"}\nspec: {image: nginx:1.26}\n"), 0o644))
	out, code = engineDiff(t, "--templates", next, "-f", cr)
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "Website.test.cuengine.dev/v1: 1 parents: 1 changed, 2 unchanged")

	after, err := kube.CoreV1().Services(ns).Get(context.Background(), "site-0", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "diff never writes")
	_, err = kube.NetworkingV1().Ingresses(ns).Get(context.Background(), "site-0", metav1.GetOptions{})
	assert.NoError(t, err, "diff never deletes")
}
