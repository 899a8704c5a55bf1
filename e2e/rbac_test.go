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
	// The engine below keeps its revisions in a namespace of this test's
	// (startEngine): a second Role, there.
	revisions := revisionNamespace(t)
	rbac, err := runEngine("rbac", "--templates", dir, "--revision-namespace", revisions)
	require.NoError(t, err, rbac)
	kubectlStdin(t, rbac, "apply", "-f", "-") // the Role and its binding name their namespace
	t.Cleanup(func() {
		_, _ = kubectlErr("delete", "clusterrole,clusterrolebinding", "engine")
		_, _ = kubectlErr("-n", "engine-system", "delete", "role,rolebinding", "engine")
		_, _ = kubectlErr("-n", revisions, "delete", "role,rolebinding", "engine")
	})
	kubeconfig := serviceAccountKubeconfig(t, "engine-system", "engine")

	sa := "system:serviceaccount:engine-system:engine"
	assertRights(t, sa, "engine-system", revisions, false)
	assertCan(t, sa, false, "delete", "controllerrevisions.apps", "-n", "engine-system") // not where the revisions are
	assertCan(t, sa, false, "create", "secrets")                                         // a kind no template declares
	assertCan(t, sa, false, "delete", "mykinds.webapp.my.domain")                        // the engine never deletes parents

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

// assertRights checks, with `kubectl auth can-i` as the engine's identity,
// that it may do what it needs and nothing of the kind elsewhere: its
// Leases in ns and its revisions in revisions only, CRDs only with
// installCRDs and then updates only of the templates' own.
func assertRights(t *testing.T, as, ns, revisions string, installCRDs bool) {
	t.Helper()
	for _, can := range [][]string{
		{"get", "leases.coordination.k8s.io/engine.cuengine.dev", "-n", ns},
		{"create", "leases.coordination.k8s.io", "-n", ns},
		{"update", "leases.coordination.k8s.io/engine.cuengine.dev", "-n", ns},
		{"list", "controllerrevisions.apps", "-n", revisions},
		{"create", "controllerrevisions.apps", "-n", revisions},
		{"delete", "controllerrevisions.apps", "-n", revisions},
		{"create", "deployments.apps", "-A"},
		{"watch", "mykinds.webapp.my.domain", "-A"},
		{"update", "mykinds.webapp.my.domain", "--subresource=status", "-A"},
		{"create", "events", "-A"},
		{"create", "tokenreviews.authentication.k8s.io"},
		{"create", "subjectaccessreviews.authorization.k8s.io"},
	} {
		assertCan(t, as, true, can...)
	}
	for _, cannot := range [][]string{
		{"update", "leases.coordination.k8s.io/kube-controller-manager", "-n", "kube-system"},
		{"create", "leases.coordination.k8s.io", "-n", "kube-system"},
		{"update", "leases.coordination.k8s.io", "-n", "kube-node-lease"},
		{"delete", "controllerrevisions.apps", "-n", "kube-system"},
		{"delete", "controllerrevisions.apps", "-n", "default"},
		{"list", "controllerrevisions.apps", "-A"},
		{"delete", "customresourcedefinitions.apiextensions.k8s.io/mykinds.webapp.my.domain"},
		{"update", "customresourcedefinitions.apiextensions.k8s.io/leases.example.com"},
	} {
		assertCan(t, as, false, cannot...)
	}
	assertCan(t, as, installCRDs, "create", "customresourcedefinitions.apiextensions.k8s.io")
	assertCan(t, as, installCRDs, "update", "customresourcedefinitions.apiextensions.k8s.io/mykinds.webapp.my.domain")
}

// assertCan asks `kubectl auth can-i` as a user.
func assertCan(t *testing.T, as string, want bool, args ...string) {
	t.Helper()
	out, _ := kubectlErr(append([]string{"auth", "can-i", "--as=" + as}, args...)...)
	lines := strings.Split(strings.TrimSpace(out), "\n") // after any warnings
	answer := map[bool]string{true: "yes", false: "no"}[want]
	assert.Equal(t, answer, lines[len(lines)-1], "%s can-i %s", as, strings.Join(args, " "))
}
