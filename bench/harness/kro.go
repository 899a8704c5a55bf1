package harness

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

// kro, the peer: kubernetes-sigs/kro at the version hack/tools/kro/go.mod
// pins, built into bin/kro by `hack/build-assets.sh kro`. It runs on a
// control plane of its own with its CRDs and the ResourceGraphDefinition of
// kro-mykind.yaml, from which it generates the MyKind CRD itself.

// kroModule is kro's Go module; hack/tools/kro pins its version.
const kroModule = "github.com/kubernetes-sigs/kro"

// kroRGD is the ResourceGraphDefinition equivalent to
// examples/templates/mykind.cue.
//
//go:embed kro-mykind.yaml
var kroRGD []byte

// rgdGVR is the resource of kro's ResourceGraphDefinitions.
var rgdGVR = schema.GroupVersionResource{Group: "kro.run", Version: "v1alpha1", Resource: "resourcegraphdefinitions"}

// kroRGDName is metadata.name in kro-mykind.yaml.
const kroRGDName = "mykind"

// kroReadyTimeout bounds the wait for kro to turn the RGD into the MyKind
// CRD.
const kroReadyTimeout = 2 * time.Minute

// kroArgs are kro's flags: the kubeconfig, no metrics or health ports (other
// runs may share the machine), and extra for a variant (its workers).
func kroArgs(kubeconfig string, extra ...string) []string {
	return append([]string{"--kubeconfig", kubeconfig, "--metrics-bind-address", "0", "--health-probe-bind-address", "0"}, extra...)
}

// loadKroCRDs reads the CRDs of the pinned kro module (helm/crds), the
// module's directory found by `go list -m` in hack/tools/kro, and returns
// them with the module's version.
func loadKroCRDs(ctx context.Context, root string) ([]*apiextensionsv1.CustomResourceDefinition, string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Version}} {{.Dir}}", kroModule)
	cmd.Dir = filepath.Join(root, "hack", "tools", "kro")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, "", fmt.Errorf("locating the %s module (run `hack/build-assets.sh kro`): %w\n%s", kroModule, err, stderr.String())
	}
	version, moduleDir, _ := strings.Cut(strings.TrimSpace(stdout.String()), " ")
	dir := filepath.Join(moduleDir, "helm", "crds")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, "", fmt.Errorf("no kro CRDs in %s", dir)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, "", fmt.Errorf("reading kro's CRDs: %w", err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(b, crd); err != nil {
			return nil, "", fmt.Errorf("decoding %s: %w", f, err)
		}
		crds = append(crds, crd)
	}
	return crds, version, nil
}

// prepareKro creates the MyKind ResourceGraphDefinition and waits until kro
// reports it Active and the MyKind CRD it generated is served.
func prepareKro(ctx context.Context, e *env, log *logger, alive func() error) error {
	rgd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(kroRGD, &rgd.Object); err != nil {
		return fmt.Errorf("decoding kro-mykind.yaml: %w", err)
	}
	if rgd.GetName() != kroRGDName {
		return fmt.Errorf("kro-mykind.yaml names %q, want %q", rgd.GetName(), kroRGDName)
	}
	if _, err := e.dyn.Resource(rgdGVR).Create(ctx, rgd, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the ResourceGraphDefinition: %w", err)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, kroReadyTimeout)
	defer cancel()
	for {
		state, err := kroState(ctx, e, rgd.GetName())
		if err != nil {
			return err
		}
		if state == "Active" {
			if _, err := e.dyn.Resource(myKindGVR).Namespace(benchNamespace).List(ctx, metav1.ListOptions{Limit: 1}); err == nil {
				log.printf("kro: ResourceGraphDefinition %s Active, MyKind served (%s)", rgd.GetName(), since(start))
				return nil
			}
		}
		if err := alive(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kro: the ResourceGraphDefinition is %q after %s, not Active", state, kroReadyTimeout)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// kroState returns the RGD's status.state ("Active" once its CRD and
// controller are ready).
func kroState(ctx context.Context, e *env, name string) (string, error) {
	u, err := e.dyn.Resource(rgdGVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading the ResourceGraphDefinition: %w", err)
	}
	state, _, _ := unstructured.NestedString(u.Object, "status", "state")
	return state, nil
}

// editKroImage is phase (e) for kro: the image in the RGD's Deployment
// template.
func editKroImage(ctx context.Context, e *env) error {
	patch := fmt.Appendf(nil, `[{"op":"test","path":%[1]q,"value":%[2]q},{"op":"replace","path":%[1]q,"value":%[3]q}]`,
		"/spec/resources/0/template/spec/template/spec/containers/0/image", imageBefore, imageAfter)
	if _, err := e.dyn.Resource(rgdGVR).Patch(ctx, kroRGDName, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("editing the image in the ResourceGraphDefinition: %w", err)
	}
	return nil
}
