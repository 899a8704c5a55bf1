package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// serviceAccountKubeconfig writes a kubeconfig that authenticates with a
// token of the ServiceAccount, as the engine would in a pod.
func serviceAccountKubeconfig(t *testing.T, ns, sa string) string {
	t.Helper()
	token := strings.TrimSpace(kubectl(t, "-n", ns, "create", "token", sa, "--duration=1h"))
	admin, err := clientcmd.LoadFromFile(cluster.Kubeconfig)
	require.NoError(t, err)
	cfg := admin.DeepCopy()
	cfg.AuthInfos = map[string]*clientcmdapi.AuthInfo{sa: {Token: token}}
	for _, c := range cfg.Contexts {
		c.AuthInfo = sa
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// TestLeastPrivilegeRBAC runs the engine with only the role `engine rbac`
// generates, bound to a ServiceAccount whose token is in its kubeconfig.
func TestLeastPrivilegeRBAC(t *testing.T) {
	dir := templatesDir(t, "examples/templates/mykind.cue", "engine/testdata/templates/website.cue")
	installCRDs(t, dir)
	kubectl(t, "create", "namespace", "engine-system")
	kubectl(t, "-n", "engine-system", "create", "serviceaccount", "engine")
	rbac, err := runEngine("rbac", "--templates", dir)
	require.NoError(t, err, rbac)
	kubectlApply(t, "default", rbac)
	t.Cleanup(func() { _, _ = kubectlErr("delete", "clusterrole,clusterrolebinding", "engine") })
	kubeconfig := serviceAccountKubeconfig(t, "engine-system", "engine")

	sa := "--as=system:serviceaccount:engine-system:engine"
	assert.Equal(t, "yes", strings.TrimSpace(kubectl(t, "auth", "can-i", "create", "deployments.apps", sa)))
	out, _ := kubectlErr("auth", "can-i", "create", "secrets", sa)
	assert.Equal(t, "no", strings.TrimSpace(out), "a kind no template declares is forbidden")
	out, _ = kubectlErr("auth", "can-i", "delete", "mykinds.webapp.my.domain", sa)
	assert.Equal(t, "no", strings.TrimSpace(out), "the engine never deletes parents")

	eng := startEngine(t, dir, "--kubeconfig", kubeconfig, "--leader-elect", "--leader-election-namespace", "engine-system")
	ns := namespace(t)
	kubectlApply(t, ns, "apiVersion: webapp.my.domain/v1\nkind: MyKind\nmetadata: {name: rbac}\nspec: {deploymentName: rbac-web}\n")
	kubectlApply(t, ns, "apiVersion: test.cuengine.dev/v1\nkind: Website\nmetadata: {name: rbac-site}\nspec: {image: nginx, expose: true}\n")
	eventually(t, "MyKind Ready", 60*time.Second, func(ctx context.Context) (bool, error) {
		status, _, err := condition(ctx, myKinds, ns, "rbac", "Ready")
		return status == "True", err
	})
	eventually(t, "the Website's Ingress", 30*time.Second, func(ctx context.Context) (bool, error) {
		_, err := kube.NetworkingV1().Ingresses(ns).Get(ctx, "rbac-site", metav1.GetOptions{})
		return err == nil, err
	})
	// Events are recorded with the role too.
	eventually(t, "a Created event", 30*time.Second, func(ctx context.Context) (bool, error) {
		out, err := kubectlErr("-n", ns, "get", "events", "--field-selector", "reason=Created", "-o", "name")
		return strings.TrimSpace(out) != "", err
	})
	assert.NotContains(t, eng.log.String(), "forbidden", "the role covers everything the engine does")
}
