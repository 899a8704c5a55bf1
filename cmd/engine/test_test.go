package main

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// copyExamples copies the example templates, their test cases included, into
// a temporary directory.
func copyExamples(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS(examples)))
	return dir
}

// edit replaces old with new in a file, which must contain old.
func edit(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(b), old)
	require.NoError(t, os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o644))
}

func TestTestExamplesPass(t *testing.T) {
	out, errOut, code := run(t, "test", "--templates", examples)
	require.Equal(t, 0, code, out+errOut)
	for _, c := range []string{
		"gcs/bucket-exists", "gcs/defaults", "gcs/invalid-bucket-name", "gcs/orphan",
		"mykind/defaults", "mykind/invalid-replicas", "mykind/ready", "mykind/rename", "mykind/scale-to-zero",
		"storefront/after-bucket", "storefront/before-bucket",
		"teamapp/settings-missing", "teamapp/with-settings",
	} {
		assert.Contains(t, out, "--- PASS: "+c+" (")
	}
	assert.NotContains(t, out, "FAIL")
	assert.Regexp(t, `(?m)^ok    \S+  17 cases \(\d+\.\d+s\)\n$`, out)
	assert.NotContains(t, out, "warning", "warnings of passing cases only with -v")

	out, _, code = run(t, "test", "--templates", examples, "-v", "-run", "mykind/defaults")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "=== RUN   mykind/defaults\n--- PASS: mykind/defaults (")
	assert.Contains(t, out, `    warning: tests/mykind/defaults/parent.yaml: unknown field "spec.foo" dropped (not in the schema of mykind.cue), as the apiserver drops it`)
}

// A deliberately broken copy of each example template fails its cases, and
// the output points at the difference.
func TestTestBrokenTemplatesFail(t *testing.T) {
	tests := []struct {
		name   string
		file   string
		old    string
		new    string
		failed []string
		output []string
	}{{
		name:   "mykind replicas wired to a constant",
		file:   "mykind.cue",
		old:    "replicas: parent.spec.replicas",
		new:    "replicas: 1",
		failed: []string{"mykind/ready", "mykind/rename", "mykind/scale-to-zero"},
		output: []string{
			"    tests/mykind/scale-to-zero/expect.cue: the output does not satisfy the expectation:\n" +
				"    children.deployment.spec.replicas: conflicting values 1 and 0:\n" +
				"        ./tests/mykind/scale-to-zero/expect.cue:2:39\n",
			"    tests/mykind/ready/want.yaml differs from the rendering (engine test --update rewrites it):\n" +
				"    --- tests/mykind/ready/want.yaml (want)\n" +
				"    +++ rendered (got)\n",
			"    -  replicas: 2\n    +  replicas: 1\n",
		},
	}, {
		name:   "mykind deployment name no longer from the spec",
		file:   "mykind.cue",
		old:    "metadata: name: parent.spec.deploymentName",
		new:    `metadata: name: "mykind"`,
		failed: []string{"mykind/rename"},
		output: []string{`    children.deployment.metadata.name: conflicting values "mykind" and "web-v2":`},
	}, {
		name:   "mykind replicas from a string field: the schema of Deployment",
		file:   "mykind.cue",
		old:    "replicas: parent.spec.replicas",
		new:    "replicas: parent.spec.deploymentName",
		failed: []string{"mykind/defaults", "mykind/invalid-replicas", "mykind/ready", "mykind/rename", "mykind/scale-to-zero"},
		output: []string{"--- FAIL: mykind/scale-to-zero (0.00s)\n    the template does not load:\n" +
			"    mykind.cue:23:13: children.deployment.spec.replicas: conflicting values int32 and string (parent.spec.deploymentName, mykind.cue:12:3)\n"},
	}, {
		name:   "mykind replicas unbounded",
		file:   "mykind.cue",
		old:    "replicas: *1 | int32 & >=0",
		new:    "replicas: *1 | int32",
		failed: []string{"mykind/invalid-replicas"},
		output: []string{"    tests/mykind/invalid-replicas/expect.cue: want an error matching \"parent.spec.replicas: refused by the CRD schema"},
	}, {
		name:   "gcs bucket name suffix dropped",
		file:   "gcs.cue",
		old:    `bucketFullName: *observed.bucket.name | ""`,
		new:    `bucketFullName: parent.spec.bucketName`,
		failed: []string{"gcs/bucket-exists", "gcs/defaults"},
		output: []string{
			`    status.bucketFullName: conflicting values "example" and "example-0a1b2c3d":`,
			"    -  bucketFullName: \"\"\n    +  bucketFullName: example\n",
		},
	}, {
		name:   "gcs bucket name pattern dropped",
		file:   "gcs.cue",
		old:    ` & =~"^[a-z0-9][a-z0-9_.-]*[a-z0-9]$"`,
		new:    ``,
		failed: []string{"gcs/invalid-bucket-name"},
		output: []string{"    tests/gcs/invalid-bucket-name/expect.cue: want an error matching =~"},
	}, {
		name:   "gcs deletion policy ignored",
		file:   "gcs.cue",
		old:    "deletionPolicy: parent.spec.deletionPolicy",
		new:    `deletionPolicy: "Delete"`,
		failed: []string{"gcs/orphan"},
		output: []string{`    resources.bucket.deletionPolicy: conflicting values "Delete" and "Orphan":`},
	}, {
		name:   "storefront deployment not gated on the bucket",
		file:   "storefront/storefront.cue",
		old:    "if observed.assets != _|_ {",
		new:    "if true {",
		failed: []string{"storefront/before-bucket"},
		output: []string{"    the parent does not render:\n" +
			"    storefront/storefront.cue:50:45: children.app.spec.template.spec.containers.0.env.0.value: undefined field: assets\n"},
	}, {
		name:   "storefront bucket name not passed to the deployment",
		file:   "storefront/storefront.cue",
		old:    `{name: "BUCKET_NAME", value: observed.assets.name}`,
		new:    `{name: "BUCKET_NAME", value: parent.spec.bucketName}`,
		failed: []string{"storefront/after-bucket"},
		output: []string{"    -          value: shop-assets-0a1b2c3d\n    +          value: shop-assets\n"},
	}, {
		name:   "teamapp settings not read",
		file:   "teamapp.cue",
		old:    `value: *observed.settings.data.logLevel | "info"`,
		new:    `value: "info"`,
		failed: []string{"teamapp/with-settings"},
		output: []string{"    -          value: debug\n    +          value: info\n"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyExamples(t)
			edit(t, filepath.Join(dir, tc.file), tc.old, tc.new)
			out, errOut, code := run(t, "test", "--templates", dir)
			assert.Equal(t, 1, code, errOut)
			var failed []string
			for _, l := range strings.Split(out, "\n") {
				if name, ok := strings.CutPrefix(l, "--- FAIL: "); ok {
					failed = append(failed, strings.Fields(name)[0])
				}
			}
			assert.Equal(t, tc.failed, failed, out)
			for _, s := range tc.output {
				assert.Contains(t, out, s)
			}
			assert.Regexp(t, `(?m)^FAIL  \S+  \d+ of 17 cases failed`, out)
		})
	}
}

func TestTestRunFilter(t *testing.T) {
	out, _, code := run(t, "test", "--templates", examples, "-run", "^storefront/")
	require.Equal(t, 0, code)
	assert.Equal(t, 2, strings.Count(out, "--- PASS: "), out)
	assert.Contains(t, out, "--- PASS: storefront/after-bucket")
	assert.NotContains(t, out, "mykind")

	out, _, code = run(t, "test", "--templates", examples, "-run", "nothing-matches")
	require.Equal(t, 0, code)
	assert.Contains(t, out, `no case matches -run "nothing-matches"`)

	_, errOut, code := run(t, "test", "--templates", examples, "-run", "(")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "-run: error parsing regexp")
}

func TestTestUpdateRewritesGolden(t *testing.T) {
	dir := copyExamples(t)
	edit(t, filepath.Join(dir, "mykind.cue"), `image: "nginx:latest"`, `image: "nginx:1.27"`)
	want := filepath.Join(dir, "tests", "mykind", "ready", "want.yaml")

	out, _, code := run(t, "test", "--templates", dir, "-run", "mykind/ready")
	require.Equal(t, 1, code)
	assert.Contains(t, out, "    -      - image: nginx:latest\n    +      - image: nginx:1.27\n")

	out, _, code = run(t, "test", "--templates", dir, "--update", "-v")
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "    updated tests/mykind/ready/want.yaml")
	b, err := os.ReadFile(want)
	require.NoError(t, err)
	assert.Contains(t, string(b), "image: nginx:1.27")

	out, _, code = run(t, "test", "--templates", dir)
	require.Equal(t, 0, code, out)

	// A case with no expectation gets a want.yaml from --update.
	fresh := filepath.Join(dir, "tests", "mykind", "fresh")
	require.NoError(t, os.MkdirAll(fresh, 0o755))
	parent, err := os.ReadFile(filepath.Join(dir, "tests", "mykind", "ready", "parent.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(fresh, "parent.yaml"), parent, 0o644))
	out, _, code = run(t, "test", "--templates", dir, "-run", "fresh")
	require.Equal(t, 1, code)
	assert.Contains(t, out, "    no expectation: add want.yaml (engine test --update writes it) or expect.cue")
	_, _, code = run(t, "test", "--templates", dir, "-run", "fresh", "--update")
	require.Equal(t, 0, code)
	_, err = os.Stat(filepath.Join(fresh, "want.yaml"))
	assert.NoError(t, err)
}

func TestTestJUnit(t *testing.T) {
	dir := copyExamples(t)
	edit(t, filepath.Join(dir, "mykind.cue"), "replicas: parent.spec.replicas", "replicas: 1")
	report := filepath.Join(t.TempDir(), "junit.xml")
	_, _, code := run(t, "test", "--templates", dir, "--junit", report)
	require.Equal(t, 1, code)

	b, err := os.ReadFile(report)
	require.NoError(t, err)
	var got junitSuites
	require.NoError(t, xml.Unmarshal(b, &got))
	assert.Equal(t, 17, got.Tests)
	assert.Equal(t, 3, got.Failures)
	var suites []string
	for _, s := range got.Suites {
		suites = append(suites, s.Name)
	}
	assert.Equal(t, []string{"gcs", "mykind", "storefront", "teamapp", "webapp"}, suites)
	mk := got.Suites[1]
	assert.Equal(t, 5, mk.Tests)
	assert.Equal(t, 3, mk.Failures)
	var scale *junitCase
	for i := range mk.Cases {
		if mk.Cases[i].Name == "scale-to-zero" {
			scale = &mk.Cases[i]
		}
	}
	require.NotNil(t, scale)
	assert.Equal(t, "mykind", scale.Classname)
	require.NotNil(t, scale.Failure)
	assert.Equal(t, "tests/mykind/scale-to-zero/expect.cue: the output does not satisfy the expectation:", scale.Failure.Message)
	assert.Contains(t, scale.Failure.Text, "children.deployment.spec.replicas: conflicting values 1 and 0")
	for _, c := range got.Suites[0].Cases {
		assert.Nil(t, c.Failure, c.Name)
	}
}

func TestTestCaseProblems(t *testing.T) {
	dir := copyExamples(t)
	cases := filepath.Join(dir, "tests")
	// An expectation the output lacks, and an absent child asserted.
	require.NoError(t, os.WriteFile(filepath.Join(cases, "mykind", "scale-to-zero", "expect.cue"), []byte(
		"children: deployment: spec: replicas: 0\nchildren: service: spec: type: \"ClusterIP\"\n"), 0o644))
	// A parent of another kind.
	require.NoError(t, os.WriteFile(filepath.Join(cases, "gcs", "orphan", "parent.yaml"), []byte(
		"apiVersion: webapp.my.domain/v1\nkind: MyKind\nmetadata: {name: x}\nspec: {deploymentName: x}\n"), 0o644))
	// Cases for a template that does not exist.
	require.NoError(t, os.MkdirAll(filepath.Join(cases, "website", "defaults"), 0o755))
	// An expected error that does not come.
	require.NoError(t, os.WriteFile(filepath.Join(cases, "mykind", "rename", "expect.cue"), []byte("error: \"refused\"\n"), 0o644))

	out, _, code := run(t, "test", "--templates", dir)
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "--- FAIL: website/* (0.00s)\n    tests/website has no template: no website.cue or website/ template in "+dir+"\n")
	assert.Contains(t, out, "--- FAIL: mykind/scale-to-zero (")
	assert.Contains(t, out, `    children.service: not in the output (want { spec: { type: "ClusterIP" } })`)
	assert.Contains(t, out, "    tests/gcs/orphan/parent.yaml: a MyKind (webapp.my.domain/v1), but template gcs.cue is for Gcs (storage.matsumo.dev/v1)\n")
	assert.Contains(t, out, `    tests/mykind/rename/expect.cue: want an error matching "refused", but the parent rendered without one`)
	assert.Contains(t, out, "FAIL  "+dir+"  4 of 18 cases failed")
}
