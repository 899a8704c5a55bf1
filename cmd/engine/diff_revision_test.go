package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/revisions"
	"github.com/cuengine/engine/templates"
)

func TestDiffRevisionArgs(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"against without revision", []string{"--against", "2"}, "--against needs --revision: it names the revision that --revision is compared with"},
		{"namespace without revision", []string{"-n", "apps"}, "--namespace and --revision-namespace go with --revision: without it, engine diff compares --templates with every object of their kinds (-f names some)"},
		{"object without revision", []string{"mk/a"}, `unexpected argument "mk/a": an object (KIND/NAME) is named only with --revision; without it, engine diff compares --templates with every object of their kinds (-f names some)`},
		{"no object", []string{"--revision", "2"}, "--revision diffs one object: name it as KIND/NAME (mykind/web) or KIND NAME"},
		{"no name", []string{"--revision", "2", "mk/"}, `"mk/" is not KIND/NAME: --revision diffs one object: name it as KIND/NAME (mykind/web) or KIND NAME`},
		{"no kind", []string{"--revision", "2", "a"}, `"a" is not KIND/NAME: --revision diffs one object: name it as KIND/NAME (mykind/web) or KIND NAME`},
		{"too many slashes", []string{"--revision", "2", "mk/a/b"}, `"mk/a/b" is not KIND/NAME: --revision diffs one object: name it as KIND/NAME (mykind/web) or KIND NAME`},
		{"slash and name", []string{"--revision", "2", "mk/a", "b"}, `"mk/a b" is not KIND NAME: --revision diffs one object: name it as KIND/NAME (mykind/web) or KIND NAME`},
		{"three arguments", []string{"--revision", "2", "mk", "a", "b"}, "too many arguments (3): --revision diffs one object: name it as KIND/NAME (mykind/web) or KIND NAME"},
		{"revision not a number", []string{"--revision", "v2", "mk/a"}, "--revision \"v2\" is not a revision number: `engine rollout history KIND` lists them (1, 2, ...)"},
		{"revision zero", []string{"--revision", "0", "mk/a"}, "--revision \"0\" is not a revision number: `engine rollout history KIND` lists them (1, 2, ...)"},
		{"against not a number", []string{"--revision", "2", "--against", "-1", "mk/a"}, "--against \"-1\" is not a revision number: `engine rollout history KIND` lists them (1, 2, ...)"},
		{"templates with revision", []string{"--revision", "2", "--templates", "dir", "mk/a"}, "--templates and --revision do not go together: --revision compares two stored revisions of the kind's template, --templates a directory with the cluster"},
		{"file with revision", []string{"--revision", "2", "-f", "cr.yaml", "mk/a"}, "-f and --revision do not go together: name the object as KIND/NAME"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := run(t, append([]string{"diff", "--kubeconfig", "/nonexistent"}, tc.args...)...)
			assert.Equal(t, 2, code)
			assert.Empty(t, out)
			assert.Equal(t, tc.want, errOut)
		})
	}

	t.Run("accepted", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			kind string
		}{{[]string{"mk/a"}, "mk"}, {[]string{"mk", "a"}, "mk"}, {[]string{"MyKind.webapp.my.domain/a"}, "MyKind.webapp.my.domain"}} {
			o := &diffOptions{revisions: revisionDiffOptions{revision: "3", against: " 1 "}}
			require.NoError(t, o.validate(newDiffCommand(), tc.args), tc.args)
			assert.Equal(t, revisionDiffOptions{revision: "3", against: " 1 ", kind: tc.kind, name: "a", a: 3, b: 1}, o.revisions, tc.args)
		}
	})
}

func TestDiffRevisionBase(t *testing.T) {
	kr := &revisions.Stored{Kind: "MyKind.webapp.my.domain/v1", Revisions: []revisions.Revision{
		{Number: 2, Hash: "h2"}, {Number: 5, Hash: "h1"}, // h1 renumbered from 1 to 5
	}}
	for _, tc := range []struct {
		name    string
		number  int64
		hash    string
		against int64
		want    int64
		err     string
	}{
		{name: "by hash", number: 1, hash: "h1", want: 5},
		{name: "by number without a hash", number: 2, want: 2},
		{name: "against", number: 2, hash: "h2", against: 5, want: 5},
		{name: "pruned", number: 3, hash: "h3", err: "MyKind apps/a runs revision 3 (h3), which is no longer stored: name the revision to compare with, --against B"},
		{name: "none yet", err: "MyKind apps/a runs no revision yet (its status.templateRevision is empty): name the revision to compare with, --against B"},
		{name: "unknown against", number: 2, hash: "h2", against: 9, err: "MyKind.webapp.my.domain has no revision 9: its stored revisions are 2, 5 (`engine rollout history mk`)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := myKind("a", tc.number, tc.hash, true, false, "")
			rev, err := base(kr, &p, tc.against, "mk")
			if tc.err != "" {
				assert.EqualError(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, rev.Number)
		})
	}
}

// variantTemplate is the example MyKind template with replacements made
// in its source, and a comment, so that versions that render the same
// still differ in their content hash. It returns the template and its
// directory.
func variantTemplate(t *testing.T, gvk schema.GroupVersionKind, comment string, oldnew ...string) (*templates.Template, string) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(examples, "mykind.cue"))
	require.NoError(t, err)
	edited := strings.NewReplacer(oldnew...).Replace(string(src)) + "\n// " + comment + "\n"
	for i := 0; i < len(oldnew); i += 2 {
		require.Contains(t, string(src), oldnew[i], "the example changed: update the test")
	}
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "mykind.cue"), []byte(edited), 0o644))
	set, err := templates.Load(dir)
	require.NoError(t, err)
	tpl, ok := set.Lookup(gvk)
	require.True(t, ok)
	return tpl, dir
}

// TestDiffRevisionsOnCluster stores revisions of the MyKind template as the
// engine does, and an object running the first with its live Deployment,
// and compares revisions for that object on a real apiserver.
func TestDiffRevisionsOnCluster(t *testing.T) {
	const image = `image: "nginx:latest"`
	v1, _ := variantTemplate(t, myKindGVK, "1", image, `image: "nginx:1.26"`)
	v2, v2dir := variantTemplate(t, myKindGVK, "2", image, `image: "nginx:1.27"`)
	v3, _ := variantTemplate(t, myKindGVK, "3: renders as 1", image, `image: "nginx:1.26"`)
	v4, _ := variantTemplate(t, myKindGVK, "4", image, `image: "nginx:1.27"`,
		"readyReplicas: *observed.deployment.status.readyReplicas | 0", "readyReplicas: *(observed.deployment.status.readyReplicas + 10) | 0",
		"status: {", `children: service: {apiVersion: "v1", kind: "Service", metadata: name: parent.spec.deploymentName, spec: ports: [{port: 80}]}

status: {`)
	otherGVK := myKindGVK.GroupVersion().WithKind("OtherKind")
	other, _ := variantTemplate(t, otherGVK, "5", `kind:       "MyKind"`, `kind:       "OtherKind"`)

	rc := startRolloutCluster(t, v1.CRD())
	ctx := context.Background()
	rc.record(t, "engine-system", v1, 1, revisions.PhaseComplete, 0, "")
	rc.record(t, "engine-system", v2, 2, revisions.PhaseComplete, 0, "")
	rc.record(t, "engine-system", v3, 3, revisions.PhaseComplete, 0, "")
	rc.record(t, "engine-system", v4, 4, revisions.PhaseComplete, 0, "")
	// A revision labelled as MyKind's that holds another kind's template.
	misfiled := revisions.ObjectOf("engine-system", myKindGVK, revisions.Revision{Number: 5, Hash: other.Hash, Path: other.Path, Phase: revisions.PhaseComplete}, other.Files())
	require.NoError(t, rc.c.Create(ctx, misfiled))

	// Object a runs revision 1; its Deployment reports 2 ready replicas.
	rc.parent(t, "a", 1, v1.Hash, true, "")
	a := &unstructured.Unstructured{}
	a.SetGroupVersionKind(myKindGVK)
	require.NoError(t, rc.c.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "a"}, a))
	rendered, err := v1.Evaluate(templates.Input{Parent: a})
	require.NoError(t, err)
	require.Len(t, rendered.Children, 1)
	deployment, err := render.Desired(a, v1.Policy, render.MapperScoper{Mapper: rc.c.RESTMapper()}, rendered.Children[0])
	require.NoError(t, err)
	require.NoError(t, rc.c.Create(ctx, deployment))
	deployment.Object["status"] = map[string]any{"replicas": int64(2), "readyReplicas": int64(2)}
	require.NoError(t, rc.c.Status().Update(ctx, deployment))
	rc.parent(t, "fresh", 0, "", false, "")

	diff := func(args ...string) (string, string, int) {
		return run(t, append([]string{"diff", "--kubeconfig", rc.kubeconfig}, args...)...)
	}

	t.Run("an image edit", func(t *testing.T) {
		out, errOut, code := diff("--revision", "2", "-n", "apps", "mk/a")
		assert.Equal(t, 1, code, errOut)
		assert.Empty(t, errOut)
		assert.Equal(t, `# MyKind apps/a: Deployment apps/a changed
--- revision 1/Deployment apps/a
+++ revision 2/Deployment apps/a
@@ -27,5 +27,5 @@
         deployment-name: a
     spec:
       containers:
-      - image: nginx:1.26
+      - image: nginx:1.27
         name: nginx
`, out)

		again, _, code := diff("--revision", "2", "--against", "1", "-n", "apps", "MyKind", "a")
		assert.Equal(t, 1, code)
		assert.Equal(t, out, again, "--against 1 is the revision a runs")

		back, _, code := diff("--revision", "1", "--against", "2", "-n", "apps", "mykinds.webapp.my.domain/a")
		assert.Equal(t, 1, code)
		assert.Contains(t, back, "--- revision 2/Deployment apps/a\n+++ revision 1/Deployment apps/a\n")
		assert.Contains(t, back, "-      - image: nginx:1.27\n+      - image: nginx:1.26\n")
	})

	t.Run("identical renderings", func(t *testing.T) {
		for _, args := range [][]string{{"--revision", "3"}, {"--revision", "1"}, {"--revision", "2", "--against", "2"}} {
			out, errOut, code := diff(append(args, "-n", "apps", "mk/a")...)
			assert.Equal(t, 0, code, "%v: %s", args, errOut)
			assert.Empty(t, out, args)
			assert.Empty(t, errOut, args)
		}
	})

	t.Run("a new child and a status from what is observed", func(t *testing.T) {
		out, errOut, code := diff("--revision", "4", "--against", "2", "-n", "apps", "mk/a")
		assert.Equal(t, 1, code, errOut)
		assert.Contains(t, out, "# MyKind apps/a: Service apps/a created\n--- revision 2/Service apps/a\n+++ revision 4/Service apps/a\n")
		assert.Contains(t, out, "+  - port: 80\n")
		assert.Contains(t, out, `# MyKind apps/a: status changed
--- revision 2/status
+++ revision 4/status
@@ -1,2 +1,2 @@
 status:
-  readyReplicas: 2
+  readyReplicas: 12
`, "both see the live Deployment's 2 ready replicas")
		assert.NotContains(t, out, "Deployment apps/a", "the Deployment is the same")

		out, _, code = diff("--revision", "2", "--against", "4", "-n", "apps", "mk/a")
		assert.Equal(t, 1, code)
		assert.Contains(t, out, "# MyKind apps/a: Service apps/a pruned\n--- revision 4/Service apps/a\n+++ revision 2/Service apps/a\n")
	})

	t.Run("the templates diff keeps working", func(t *testing.T) {
		out, errOut, code := diff("--templates", v2dir)
		assert.Equal(t, 1, code, errOut)
		assert.Contains(t, out, "--- live/Deployment apps/a\n+++ new/Deployment apps/a\n")
		assert.Contains(t, out, "+      - image: nginx:1.27\n")
		assert.Contains(t, out, "MyKind.webapp.my.domain/v1: 2 parents: 1 created, 1 changed\n")
	})

	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			args []string
			want string
		}{
			{"unknown revision", []string{"--revision", "9", "-n", "apps", "mk/a"}, "MyKind.webapp.my.domain has no revision 9: its stored revisions are 1, 2, 3, 4, 5 (`engine rollout history mk`)"},
			{"unknown against", []string{"--revision", "2", "--against", "7", "-n", "apps", "mk/a"}, "MyKind.webapp.my.domain has no revision 7: its stored revisions are 1, 2, 3, 4, 5 (`engine rollout history mk`)"},
			{"object not found", []string{"--revision", "2", "-n", "apps", "mk/nope"}, `MyKind.webapp.my.domain "nope" not found in namespace apps`},
			{"object in another namespace", []string{"--revision", "2", "mk/a"}, `MyKind.webapp.my.domain "a" not found in namespace default`},
			{"revision of another kind", []string{"--revision", "5", "-n", "apps", "mk/a"}, "revision 5 (ControllerRevision engine-system/" + misfiled.Name + ") is a template of OtherKind.webapp.my.domain/v1, not MyKind.webapp.my.domain/v1"},
			{"kind without revisions", []string{"--revision", "1", "-n", "apps", "deployment/a"}, "no revisions of Deployment.apps in any namespace: the engine records one when it serves the kind's template (is it running, with this kind's template?)"},
			{"unknown kind", []string{"--revision", "1", "nope/a"}, "unknown kind \"nope\": the cluster serves no such resource (is its CRD installed? `kubectl api-resources` lists the kinds)"},
			{"no revision yet", []string{"--revision", "2", "-n", "apps", "mk/fresh"}, "MyKind apps/fresh runs no revision yet (its status.templateRevision is empty): name the revision to compare with, --against B"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				out, errOut, code := diff(tc.args...)
				assert.Equal(t, 2, code)
				assert.Empty(t, out)
				assert.Equal(t, tc.want, errOut)
			})
		}

		out, errOut, code := diff("--revision", "2", "--against", "1", "-n", "apps", "mk/fresh")
		assert.Equal(t, 1, code, errOut)
		assert.Contains(t, out, "+      - image: nginx:1.27\n", "--against serves an object that runs no revision yet")
	})
}
