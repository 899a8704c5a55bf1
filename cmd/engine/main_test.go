package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const examples = "../../examples/templates"

// run executes the CLI in-process and returns stdout, stderr and the exit code.
func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var stdout bytes.Buffer
	errOut, code := runTo(t, &stdout, args...)
	return stdout.String(), errOut, code
}

// runTo is run with the command's standard output written to stdout as it
// prints; it returns the standard error and the exit code.
func runTo(t *testing.T, stdout io.Writer, args ...string) (string, int) {
	t.Helper()
	var stderr bytes.Buffer
	cmd := newRootCommand()
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(&stderr)
	err := cmd.ExecuteContext(context.Background())
	code := 0
	if err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
			stderr.WriteString(ee.msg)
		} else {
			code = 1
			stderr.WriteString(err.Error())
		}
	}
	return stderr.String(), code
}

func TestRenderSeedCR(t *testing.T) {
	out, errOut, code := run(t, "render", "--templates", examples, "-f", "testdata/seed-mykind.yaml")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, `warning: MyKind mykind-sample: unknown field "spec.foo" dropped`)
	docs := strings.Split(out, "\n---\n")
	require.Len(t, docs, 2)
	var d appsv1.Deployment
	require.NoError(t, yaml.UnmarshalStrict([]byte(docs[0]), &d))
	// What the Kubebuilder MyKind controller's buildDeployment builds.
	assert.Equal(t, "mykind", d.Name)
	assert.Equal(t, "default", d.Namespace)
	assert.Equal(t, int32(1), *d.Spec.Replicas)
	assert.Equal(t, map[string]string{"deployment-name": "mykind"}, d.Spec.Selector.MatchLabels)
	assert.Equal(t, map[string]string{"deployment-name": "mykind"}, d.Spec.Template.Labels)
	require.Len(t, d.Spec.Template.Spec.Containers, 1)
	assert.Equal(t, "nginx", d.Spec.Template.Spec.Containers[0].Name)
	assert.Equal(t, "nginx:latest", d.Spec.Template.Spec.Containers[0].Image)
	assert.Contains(t, docs[1], "readyReplicas: 0")
	assert.NotContains(t, docs[1], "foo", "the parent is shown as stored: the unknown field dropped")
}

func TestRenderObserved(t *testing.T) {
	observed := filepath.Join(t.TempDir(), "live.yaml")
	require.NoError(t, os.WriteFile(observed, []byte(`
apiVersion: apps/v1
kind: Deployment
metadata: {name: mykind, namespace: default}
status: {readyReplicas: 1}
`), 0o644))
	out, errOut, code := run(t, "render", "--templates", examples, "-f", "../../examples/crs/mykind.yaml", "--observed", observed)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "readyReplicas: 1")
}

func TestRenderShowsFieldsLeftToOthers(t *testing.T) {
	out, errOut, code := run(t, "render", "--templates", "../../examples/autoscaled/templates", "-f", "../../examples/autoscaled/autoscaled.yaml")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "# child \"deployment\" (left to other writers: spec.replicas CreateOnly)\n")
	assert.Contains(t, out, "engine.cuengine.dev/ownership: spec.replicas=CreateOnly\n")
	assert.Contains(t, out, "# child \"service\"\n", "a child that leaves nothing to others says nothing")
}

func TestRenderInvalidCR(t *testing.T) {
	cr := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(cr, []byte("apiVersion: webapp.my.domain/v1\nkind: MyKind\nmetadata: {name: bad}\nspec: {deploymentName: x, replicas: -1}\n"), 0o644))
	_, errOut, code := run(t, "render", "--templates", examples, "-f", cr)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "MyKind bad: mykind.cue:14:26: parent.spec.replicas: invalid value -1 (out of bound >=0)")
}

func TestVet(t *testing.T) {
	out, errOut, code := run(t, "vet", "--templates", examples)
	require.Equal(t, 0, code, errOut)
	assert.Empty(t, errOut, "no warnings: every kind checked, none computed")
	assert.Contains(t, out, "ok  mykind.cue")
	assert.Contains(t, out, "ok  storefront")

	_, errOut, code = run(t, "vet", "--templates", "../../templates/testdata/broken/conflict")
	assert.Equal(t, 1, code)
	assert.Equal(t, "t.cue:2:21: parent.spec.size: conflicting values int and string (mismatched types int and string) (see t.cue:3:21)", errOut)
}

// TestVetClusterParentPolicy: a cluster-scoped parent's literal targets
// that its policy does not allow are refused at their line.
func TestVetClusterParentPolicy(t *testing.T) {
	_, errOut, code := run(t, "vet", "--templates", "../../templates/testdata/broken/clusterpolicy")
	assert.Equal(t, 1, code)
	assert.Equal(t, "t.cue:4:81: references.token.metadata.namespace: Secret in namespace \"vault\", which the template's policy.crossNamespace does not list (shared)\n"+
		"t.cue:6:79: children.settings.metadata.namespace: ConfigMap in namespace \"kube-system\", which the template's policy.crossNamespace does not list (shared)\n"+
		"t.cue:8:54: children.admin.kind: ClusterRole is cluster-scoped; set policy: clusterScoped: true in the template to allow it", errOut)
}

func TestCRDs(t *testing.T) {
	out, errOut, code := run(t, "crds", "--templates", examples)
	require.Equal(t, 0, code, errOut)
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	var names []string
	for {
		var crd apiextensionsv1.CustomResourceDefinition
		err := dec.Decode(&crd)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "document %d", len(names)+1)
		names = append(names, crd.Name)
	}
	assert.Equal(t, []string{"gcs.storage.matsumo.dev", "mykinds.webapp.my.domain", "storefronts.apps.cuengine.dev", "teamapps.apps.cuengine.dev", "webapps.apps.cuengine.dev"}, names)
	assert.NotContains(t, out, "status:\n  acceptedNames", "no empty CRD status in the output")
}

func TestVersion(t *testing.T) {
	out, _, code := run(t, "version")
	require.Equal(t, 0, code)
	assert.Regexp(t, `^engine \S+ \(cue v0\.17\.1, go1\.\d+`, out)
}

func TestDevRefusesToWipeAForeignDirectory(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "precious.txt"), []byte("x"), 0o644))
	err := resetDevDir(dir)
	require.ErrorContains(t, err, "was not created by engine dev")
	_, err = os.Stat(filepath.Join(dir, "precious.txt"))
	require.NoError(t, err)

	own := filepath.Join(t.TempDir(), "dev")
	require.NoError(t, resetDevDir(own))
	require.NoError(t, os.WriteFile(filepath.Join(own, "etcd.log"), []byte("old"), 0o644))
	require.NoError(t, resetDevDir(own))
	_, err = os.Stat(filepath.Join(own, "etcd.log"))
	assert.True(t, os.IsNotExist(err), "a previous run's files are cleared")
}
