package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// writeFile replaces a file the way editors do: write a temporary file,
// rename it over the original.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	require.NoError(t, os.WriteFile(tmp, []byte(content), 0o644))
	require.NoError(t, os.Rename(tmp, path))
}

func readyz(probe string) (int, string) {
	resp, err := http.Get("http://" + probe + "/readyz?verbose")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHotReload edits the templates under a running engine.
func TestHotReload(t *testing.T) {
	dir := templatesDir(t, "examples/templates/mykind.cue")
	installCRDs(t, dir)
	eng := startEngine(t, dir)
	ns := namespace(t)
	ctx := context.Background()
	const n = 3
	for i := 0; i < n; i++ {
		kubectlApply(t, ns, fmt.Sprintf("apiVersion: webapp.my.domain/v1\nkind: MyKind\nmetadata: {name: mk-%d}\nspec: {deploymentName: web-%d}\n", i, i))
	}
	images := func(ctx context.Context) (map[string]string, error) {
		out := map[string]string{}
		for i := 0; i < n; i++ {
			d, err := kube.AppsV1().Deployments(ns).Get(ctx, fmt.Sprintf("web-%d", i), metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			out[d.Name] = d.Spec.Template.Spec.Containers[0].Image
		}
		return out, nil
	}
	allImages := func(want string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			got, err := images(ctx)
			if err != nil {
				return false, err
			}
			for _, img := range got {
				if img != want {
					return false, nil
				}
			}
			return true, nil
		}
	}
	eventually(t, "three Deployments on nginx:latest", 30*time.Second, allImages("nginx:latest"))

	path := filepath.Join(dir, "mykind.cue")
	original, err := os.ReadFile(path)
	require.NoError(t, err)
	v2 := strings.Replace(string(original), `"nginx:latest"`, `"nginx:1.27"`, 1)

	t.Run("an image change rolls every Deployment", func(t *testing.T) {
		writeFile(t, path, v2)
		eventually(t, "every Deployment on nginx:1.27", 30*time.Second, allImages("nginx:1.27"))
	})

	t.Run("a broken edit changes nothing and is visible", func(t *testing.T) {
		before, err := kube.AppsV1().Deployments(ns).Get(ctx, "web-0", metav1.GetOptions{})
		require.NoError(t, err)
		broken := strings.Replace(v2, `"nginx:1.27"`, `"nginx:1.28" & 42`, 1)
		writeFile(t, path, broken)
		eventually(t, "readyz to report the broken template", 30*time.Second, func(ctx context.Context) (bool, error) {
			code, body := readyz(eng.probe)
			return code == http.StatusInternalServerError && strings.Contains(body, "mykind.cue:"), nil
		})
		eventually(t, "a TemplateReloadFailed event on the MyKinds", 30*time.Second, func(ctx context.Context) (bool, error) {
			out, err := kubectlErr("-n", ns, "get", "events", "--field-selector", "reason=TemplateReloadFailed", "-o", "name")
			return strings.Count(out, "\n") >= n, err
		})
		// The log reaches the test through a pipe, after readyz may answer.
		eventually(t, "the refusal logged", 30*time.Second, func(context.Context) (bool, error) {
			return strings.Contains(eng.log.String(), "template reload refused"), nil
		})
		// The last good version keeps serving: drift is still corrected
		// with it, and nothing rolled to the broken image.
		kubectl(t, "-n", ns, "scale", "deployment", "web-0", "--replicas=4")
		eventually(t, "web-0 back to 1 replica", 30*time.Second, func(ctx context.Context) (bool, error) {
			d, err := kube.AppsV1().Deployments(ns).Get(ctx, "web-0", metav1.GetOptions{})
			return err == nil && *d.Spec.Replicas == 1, err
		})
		got, err := images(ctx)
		require.NoError(t, err)
		for _, img := range got {
			assert.Equal(t, "nginx:1.27", img)
		}
		after, err := kube.AppsV1().Deployments(ns).Get(ctx, "web-0", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, before.Spec.Template.Spec.Containers[0].Image, after.Spec.Template.Spec.Containers[0].Image)

		// Fixing the file clears it and converges.
		writeFile(t, path, strings.Replace(v2, `"nginx:1.27"`, `"nginx:1.28"`, 1))
		eventually(t, "every Deployment on nginx:1.28", 30*time.Second, allImages("nginx:1.28"))
		eventually(t, "readyz ok again", 30*time.Second, func(ctx context.Context) (bool, error) {
			code, _ := readyz(eng.probe)
			return code == http.StatusOK, nil
		})
	})

	t.Run("a new template starts a new kind without a restart; removing it leaves its children", func(t *testing.T) {
		site, err := os.ReadFile(filepath.Join(repo, "engine/testdata/templates/website.cue"))
		require.NoError(t, err)
		out, err := runEngine("crds", "--templates", filepath.Join(repo, "engine/testdata/templates"))
		require.NoError(t, err, out)
		kubectlApply(t, "default", out)
		kubectl(t, "wait", "--for=condition=Established", "--timeout=60s", "crd/websites.test.cuengine.dev")
		writeFile(t, filepath.Join(dir, "website.cue"), string(site))
		kubectlApply(t, ns, "apiVersion: test.cuengine.dev/v1\nkind: Website\nmetadata: {name: blog}\nspec: {image: nginx}\n")
		eventually(t, "the Website's Deployment", 30*time.Second, func(ctx context.Context) (bool, error) {
			_, err := kube.AppsV1().Deployments(ns).Get(ctx, "blog", metav1.GetOptions{})
			return err == nil, err
		})

		require.NoError(t, os.Remove(filepath.Join(dir, "website.cue")))
		eventually(t, "the engine to stop the Website controller", 30*time.Second, func(ctx context.Context) (bool, error) {
			return strings.Contains(eng.log.String(), "template removed"), nil
		})
		// Its children stay, and nobody reconciles them any more.
		kubectl(t, "-n", ns, "scale", "deployment", "blog", "--replicas=5")
		_, err = kube.AppsV1().Deployments(ns).Get(ctx, "blog", metav1.GetOptions{})
		require.NoError(t, err)
		_, err = kube.CoreV1().Services(ns).Get(ctx, "blog", metav1.GetOptions{})
		require.NoError(t, err, "the Service stays")
		// The MyKinds are still served.
		kubectl(t, "-n", ns, "delete", "deployment", "web-1")
		eventually(t, "web-1 recreated", 30*time.Second, func(ctx context.Context) (bool, error) {
			_, err := kube.AppsV1().Deployments(ns).Get(ctx, "web-1", metav1.GetOptions{})
			return err == nil, err
		})
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, "blog", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, int32(5), *d.Spec.Replicas, "no controller corrects a removed template's children")
	})
}

// runEngine runs a one-shot engine command and returns its stdout.
func runEngine(args ...string) (string, error) {
	cmd := execCommand(filepath.Join(bin, "engine"), args...)
	out, err := cmd.Output()
	return string(out), err
}

// TestInstallCRDsRefusesBreakingChanges: with --install-crds the engine
// applies the generated CRDs at start and on reload, but not a change that
// could break stored objects.
func TestInstallCRDsRefusesBreakingChanges(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gadget.cue")
	gadget := func(size, extra string) string {
		return "parent: {\n\tapiVersion: \"crdtest.cuengine.dev/v1\"\n\tkind: \"Gadget\"\n\tspec: {\n\t\tsize: " + size + "\n" + extra + "\t}\n}\n"
	}
	writeFile(t, path, gadget("int & >=0", ""))
	eng := startEngine(t, dir, "--install-crds")
	crdType := func(field string) string {
		out, _ := kubectlErr("get", "crd", "gadgets.crdtest.cuengine.dev", "-o",
			"jsonpath={.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties."+field+".type}")
		return out
	}
	eventually(t, "the CRD installed by the engine", 30*time.Second, func(ctx context.Context) (bool, error) {
		return crdType("size") == "integer", nil
	})

	writeFile(t, path, gadget("string", ""))
	eventually(t, "the breaking change refused, visibly", 30*time.Second, func(ctx context.Context) (bool, error) {
		code, body := readyz(eng.probe)
		return code == http.StatusInternalServerError && strings.Contains(body, "could break stored objects") &&
			strings.Contains(body, `spec.size: type changes from "integer" to "string"`), nil
	})
	assert.Equal(t, "integer", crdType("size"), "the stored schema is untouched")

	writeFile(t, path, gadget("int & >=0", "\t\tcolor: *\"red\" | string\n"))
	eventually(t, "a compatible change applied", 30*time.Second, func(ctx context.Context) (bool, error) {
		code, _ := readyz(eng.probe)
		return code == http.StatusOK && crdType("color") == "string", nil
	})
}
