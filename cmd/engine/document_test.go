package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/cuengine/engine/revisions"
	"github.com/cuengine/engine/templates"
)

// shelfSource is a template with a reference (the team's settings), a
// child, and a resource that depends on the child (dependsOn) and reads
// the reference, with a connection Secret and a deletion policy: every
// field of a resource's document.
const shelfSource = `package shelf

parent: {
	apiVersion: "apps.cuengine.dev/v1"
	kind:       "Shelf"
	spec: bucketName: string
}

references: settings: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "shelf-settings"}

children: config: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: parent.metadata.name
	data: team: observed.settings.data.team
}

resources: assets: {
	provider: "gcs"
	spec: {
		projectID:  observed.settings.data.project
		bucketName: parent.spec.bucketName
	}
	dependsOn: ["config"]
	deletionPolicy: "Orphan"
	connectionSecret: name: parent.metadata.name + "-assets"
}
`

const (
	shelfParent = "apiVersion: apps.cuengine.dev/v1\nkind: Shelf\nmetadata: {name: a, namespace: apps}\nspec: {bucketName: shelf-assets}\n"
	shelfLive   = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shelf-settings, namespace: apps}\ndata: {team: checkout, project: shop-prod}\n"
)

// TestResourceDocumentAgrees: `engine render`, `engine test` and `engine
// diff --revision` show one resource document for the same parent and the
// same referenced object: templates.Resource.Document, dependsOn
// included. (Before it, render and test left dependsOn out.)
func TestResourceDocumentAgrees(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "shelf.cue"), []byte(shelfSource), 0o644))
	want := map[string]any{
		"provider":         "gcs",
		"spec":             map[string]any{"projectID": "shop-prod", "bucketName": "shelf-assets"},
		"deletionPolicy":   "Orphan",
		"dependsOn":        []any{"config"},
		"connectionSecret": map[string]any{"name": "a-assets"},
	}

	// engine diff --revision: revision 1 has no resource, revision 2 is
	// the template; the resource is shown created, whole.
	set, err := templates.Load(dir)
	require.NoError(t, err)
	v2 := set.Templates()[0]
	v1, _ := variantTemplateOf(t, dir, "shelf.cue", v2.GVK, `resources: assets: {`, `_noResource: {`)
	rc := startRolloutCluster(t, v2.CRD())
	ctx := context.Background()
	rc.record(t, "engine-system", v1, 1, revisions.PhaseComplete, 0, "")
	rc.record(t, "engine-system", v2, 2, revisions.PhaseComplete, 0, "")
	settings := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "shelf-settings"}, Data: map[string]string{"team": "checkout", "project": "shop-prod"}}
	require.NoError(t, rc.c.Create(ctx, settings))
	parent := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(shelfParent), &parent.Object))
	require.NoError(t, rc.c.Create(ctx, parent))
	out, errOut, code := run(t, "diff", "--kubeconfig", rc.kubeconfig, "--revision", "2", "--against", "1", "-n", "apps", "Shelf/a")
	require.Equal(t, 1, code, errOut)
	diffDoc := createdDocument(t, out, "# Shelf apps/a: resource assets created\n")
	assert.Equal(t, want, diffDoc, "engine diff")

	// engine render --observed.
	parentFile, liveFile := filepath.Join(t.TempDir(), "a.yaml"), filepath.Join(t.TempDir(), "live.yaml")
	require.NoError(t, os.WriteFile(parentFile, []byte(shelfParent), 0o644))
	require.NoError(t, os.WriteFile(liveFile, []byte(shelfLive), 0o644))
	out, errOut, code = run(t, "render", "--templates", dir, "-f", parentFile, "--observed", liveFile)
	require.Equal(t, 0, code, errOut)
	var renderDoc map[string]any
	for _, doc := range strings.Split(out, "\n---\n") {
		if body, ok := strings.CutPrefix(doc, "# resource \"assets\" (external)\n"); ok {
			require.NoError(t, yaml.Unmarshal([]byte(body), &renderDoc))
		}
	}
	assert.Equal(t, diffDoc, renderDoc, "engine render shows what engine diff shows")

	// engine test: the case's expectation is diff's document, closed (a
	// definition), so a field missing or added on either side fails.
	js, err := json.Marshal(diffDoc)
	require.NoError(t, err)
	caseDir := filepath.Join(dir, "tests", "shelf", "with-settings")
	require.NoError(t, os.MkdirAll(caseDir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(caseDir, caseParent), []byte(shelfParent), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(caseDir, caseObserved), []byte(shelfLive), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(caseDir, caseExpect), []byte("#Document: "+string(js)+"\nresources: assets: #Document\n"), 0o644))
	out, errOut, code = run(t, "test", "--templates", dir)
	assert.Equal(t, 0, code, "engine test shows what engine diff shows:\n%s%s", out, errOut)
	assert.Contains(t, out, "--- PASS: shelf/with-settings (")
}

// variantTemplateOf loads a copy of dir's file with replacements made in
// its source; it returns the template of gvk and the copy's directory.
func variantTemplateOf(t *testing.T, dir, file string, gvk schema.GroupVersionKind, oldnew ...string) (*templates.Template, string) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(dir, file))
	require.NoError(t, err)
	for i := 0; i < len(oldnew); i += 2 {
		require.Contains(t, string(src), oldnew[i])
	}
	out := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(out, file), []byte(strings.NewReplacer(oldnew...).Replace(string(src))), 0o644))
	set, err := templates.Load(out)
	require.NoError(t, err)
	tpl, ok := set.Lookup(gvk)
	require.True(t, ok)
	return tpl, out
}

// createdDocument parses the added lines of the diff that follows header
// in out: the whole document of something created.
func createdDocument(t *testing.T, out, header string) map[string]any {
	t.Helper()
	_, rest, ok := strings.Cut(out, header)
	require.True(t, ok, "no %q in:\n%s", header, out)
	var body strings.Builder
	for _, line := range strings.SplitAfter(rest, "\n") {
		if strings.HasPrefix(line, "# ") {
			break
		}
		if strings.HasPrefix(line, "+") && !strings.HasPrefix(line, "+++") {
			body.WriteString(line[1:])
		}
	}
	var doc map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(body.String()), &doc))
	return doc
}
