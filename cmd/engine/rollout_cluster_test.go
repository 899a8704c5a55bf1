package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/internal/localcluster"
	"github.com/cuengine/engine/revisions"
	"github.com/cuengine/engine/rollout"
	"github.com/cuengine/engine/templates"
)

// rolloutTemplate is the example MyKind template with a Progressive
// rollout in three waves; each version differs in a comment, which is
// enough for a new content hash.
func rolloutTemplate(t *testing.T, version int) *templates.Template {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(examples, "mykind.cue"))
	require.NoError(t, err)
	dir := t.TempDir()
	policy := fmt.Sprintf("\n// version %d\nrollout: {strategy: \"Progressive\", waves: [1, \"50%%\", \"100%%\"]}\n", version)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "mykind.cue"), append(src, policy...), 0o644))
	set, err := templates.Load(dir)
	require.NoError(t, err)
	tpl, ok := set.Lookup(myKindGVK)
	require.True(t, ok)
	return tpl
}

// rolloutCluster is a bare apiserver with the MyKind CRD, for the commands
// of `engine rollout`; no engine runs: the test plays its part.
type rolloutCluster struct {
	c          client.Client
	kubeconfig string
}

func startRolloutCluster(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) *rolloutCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a control plane (run without -short)")
	}
	cluster, err := localcluster.Start(context.Background(), localcluster.Options{CRDs: []*apiextensionsv1.CustomResourceDefinition{crd}, Progress: os.Stderr})
	require.NoError(t, err, "starting the control plane (run `make assets` first)")
	t.Cleanup(func() { assert.NoError(t, cluster.Stop()) })
	c, err := client.New(cluster.Config, client.Options{Scheme: newScheme()})
	require.NoError(t, err)
	for _, ns := range []string{"engine-system", "apps"} {
		require.NoError(t, c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	return &rolloutCluster{c: c, kubeconfig: cluster.Kubeconfig}
}

// store is the engine's revision store of a kind in namespace ns.
func (rc *rolloutCluster) store(ns string, gvk schema.GroupVersionKind) *revisions.Store {
	return &revisions.Store{Client: rc.c, Reader: rc.c, Namespace: ns, GVK: gvk}
}

// record stores a revision of tpl as the engine does, through its store:
// recorded (the next number, which must be number), then its rollout
// state written.
func (rc *rolloutCluster) record(t *testing.T, ns string, tpl *templates.Template, number int64, phase revisions.Phase, wave int, message string) *appsv1.ControllerRevision {
	t.Helper()
	return rc.recordRevision(t, ns, tpl, number, func(rev *revisions.Revision) {
		rev.Phase, rev.Wave, rev.Message = phase, wave, message
	})
}

// recordHeld stores a revision of tpl held because it would delete
// children, as the engine records it.
func (rc *rolloutCluster) recordHeld(t *testing.T, ns string, tpl *templates.Template, number int64, held *rollout.HoldError) *appsv1.ControllerRevision {
	t.Helper()
	return rc.recordRevision(t, ns, tpl, number, func(rev *revisions.Revision) {
		rev.Phase, rev.Message, rev.HeldDeletes = revisions.PhaseHeld, held.Error(), held.Deletes
	})
}

func (rc *rolloutCluster) recordRevision(t *testing.T, ns string, tpl *templates.Template, number int64, state func(*revisions.Revision)) *appsv1.ControllerRevision {
	t.Helper()
	ctx := context.Background()
	s := rc.store(ns, tpl.GVK)
	rev, _, err := s.Ensure(ctx, tpl)
	require.NoError(t, err)
	require.Equal(t, number, rev.Number, "the store numbers the revisions in the order they are recorded")
	state(&rev)
	require.NoError(t, s.Record(ctx, rev))
	cr := &appsv1.ControllerRevision{}
	require.NoError(t, rc.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: rev.Name}, cr))
	return cr
}

// parent creates a MyKind object whose status says it runs revision
// (number, hash), Ready or not.
func (rc *rolloutCluster) parent(t *testing.T, name string, number int64, hash string, ready bool, pin string) {
	t.Helper()
	ctx := context.Background()
	u := myKind(name, number, hash, ready, false, pin)
	status := u.Object["status"].(map[string]any)
	status["observedGeneration"] = int64(1)
	delete(u.Object, "status")
	u.SetUID("")
	u.SetGeneration(0)
	u.Object["spec"] = map[string]any{"deploymentName": name}
	require.NoError(t, rc.c.Create(ctx, &u))
	u.Object["status"] = status
	require.NoError(t, rc.c.Status().Update(ctx, &u))
}

// annotations reads a revision's annotations.
func (rc *rolloutCluster) annotations(t *testing.T, cr *appsv1.ControllerRevision) map[string]string {
	t.Helper()
	got := &appsv1.ControllerRevision{}
	require.NoError(t, rc.c.Get(context.Background(), client.ObjectKeyFromObject(cr), got))
	return got.Annotations
}

// act plays the engine: it records a revision's rollout state and clears
// the users' requests it acted on, through the engine's store.
func (rc *rolloutCluster) act(t *testing.T, cr *appsv1.ControllerRevision, phase revisions.Phase, wave int, message string, clear ...string) {
	t.Helper()
	rev := revisions.RevisionOf(cr)
	rev.Phase, rev.Wave, rev.Message = phase, wave, message
	require.NoError(t, rc.store(cr.Namespace, myKindGVK).Record(context.Background(), rev, clear...))
}

// TestRolloutOnCluster runs the commands on a real apiserver, the test
// playing the engine. Its subtests are the steps of one story, in order.
func TestRolloutOnCluster(t *testing.T) {
	v1, v2, v3, v4 := rolloutTemplate(t, 1), rolloutTemplate(t, 2), rolloutTemplate(t, 3), rolloutTemplate(t, 4)
	rc := startRolloutCluster(t, v1.CRD())
	rolloutArgs := func(args ...string) []string {
		return append([]string{"rollout", "--kubeconfig", rc.kubeconfig}, args...)
	}
	rolloutCLI := func(args ...string) (string, string, int) {
		return run(t, rolloutArgs(args...)...)
	}
	hashes := strings.NewReplacer(v1.Hash, "<v1>", v2.Hash, "<v2>", v3.Hash, "<v3>", v4.Hash, "<v4>")

	rc.record(t, "engine-system", v1, 1, revisions.PhaseComplete, 0, "the first revision of the kind")
	rc.record(t, "engine-system", v2, 2, revisions.PhaseComplete, 2, "rolled out in 3 waves")
	r3 := rc.record(t, "engine-system", v3, 3, revisions.PhaseProgressing, 1, "wave 2 of 3")
	rc.parent(t, "a", 2, v2.Hash, true, "")
	rc.parent(t, "b", 2, v2.Hash, false, "")
	rc.parent(t, "c", 3, v3.Hash, true, "")
	rc.parent(t, "d", 3, v3.Hash, false, "")
	rc.parent(t, "e", 1, v1.Hash, true, "1")
	var r4 *appsv1.ControllerRevision // recorded held, later

	t.Run("status", func(t *testing.T) {
		out, errOut, code := rolloutCLI("status", "mk")
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, `MyKind.webapp.my.domain/v1: 5 objects, revisions in namespace engine-system
REVISION  HASH          PHASE        WAVE  OBJECTS  READY  STALLED  PINNED
1         <v1>  Complete     3/3   1        1      0        1
2         <v2>  Complete     3/3   2        1      0        0
3*        <v3>  Progressing  2/3   2        1      0        0
revision 3 (*) is Progressing: wave 2 of 3
`, hashes.Replace(out))

		for _, kind := range []string{"MyKind", "mykind", "mykinds", "MyKind.webapp.my.domain", "mykinds.v1.webapp.my.domain"} {
			again, errOut, code := rolloutCLI("status", kind)
			require.Equal(t, 0, code, "%s: %s", kind, errOut)
			assert.Equal(t, out, again, kind)
		}

		out, errOut, code = rolloutCLI("status", "mk", "-o", "json")
		require.Equal(t, 0, code, errOut)
		var st revisions.Fleet
		require.NoError(t, json.Unmarshal([]byte(out), &st))
		assert.Equal(t, revisions.FleetRevision{Number: 3, Hash: v3.Hash, Phase: "Progressing", Wave: 2, Waves: 3, Objects: 2, Ready: 1, Target: true, Message: "wave 2 of 3"}, st.Target)
		assert.Len(t, st.Revisions, 3)
	})

	t.Run("history", func(t *testing.T) {
		out, errOut, code := rolloutCLI("history", "mk")
		require.Equal(t, 0, code, errOut)
		assert.Regexp(t, regexp.MustCompile(`^REVISION  HASH          PHASE        CREATED  OBJECTS  PINNED  MESSAGE
1         <v1>  Complete     \d+s +1        1       the first revision of the kind
2         <v2>  Complete     \d+s +2        0       rolled out in 3 waves
3         <v3>  Progressing  \d+s +2        0       wave 2 of 3
pins: followed to revisions 1 to 3 \(rollout: pins: newest: 10\), not to a RolledBack or Held one; a refused pin keeps no revision from pruning
$`), hashes.Replace(out))
	})

	t.Run("pause and resume", func(t *testing.T) {
		out, errOut, code := rolloutCLI("pause", "mk")
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, "revision 3 of MyKind.webapp.my.domain paused: no more objects move to it until `engine rollout resume mk`\n", out)
		a := rc.annotations(t, r3)
		assert.Equal(t, "true", a[contract.AnnotationRolloutPaused])
		assert.Equal(t, "Progressing", a[contract.AnnotationRolloutPhase], "the rest is left as it was")

		out, _, code = rolloutCLI("status", "mk")
		require.Equal(t, 0, code)
		assert.Contains(t, squash(hashes.Replace(out)), "3* <v3> Paused 2/3 2 1 0 0\nrevision 3 (*) is paused at wave 2/3: `engine rollout resume mk` continues it\n")

		_, errOut, code = rolloutCLI("pause", "mk")
		assert.Equal(t, 1, code)
		assert.Equal(t, "revision 3 of MyKind.webapp.my.domain is already paused; `engine rollout resume mk` continues it", errOut)

		out, errOut, code = rolloutCLI("resume", "mk")
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, "revision 3 of MyKind.webapp.my.domain resumed\n", out)
		assert.NotContains(t, rc.annotations(t, r3), contract.AnnotationRolloutPaused)

		_, errOut, code = rolloutCLI("resume", "mk")
		assert.Equal(t, 1, code)
		assert.Equal(t, "nothing to resume: revision 3 of MyKind.webapp.my.domain is Progressing and not paused", errOut)
	})

	t.Run("undo", func(t *testing.T) {
		out, errOut, code := rolloutCLI("undo", "mk")
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, "revision 3 of MyKind.webapp.my.domain undone: the engine returns its objects to revision 2\n", out)
		assert.Equal(t, "true", rc.annotations(t, r3)[contract.AnnotationRolloutUndo])

		rc.act(t, r3, revisions.PhaseRolledBack, 1, "undone (engine rollout undo)", contract.AnnotationRolloutUndo)
		_, errOut, code = rolloutCLI("undo", "mk")
		assert.Equal(t, 1, code)
		assert.Equal(t, "revision 3 of MyKind.webapp.my.domain is already rolled back: undone (engine rollout undo)", errOut)
		out, _, _ = rolloutCLI("status", "mk")
		assert.Contains(t, hashes.Replace(out), "revision 3 (*) was rolled back: undone (engine rollout undo)\n")
	})

	t.Run("a held revision is approved", func(t *testing.T) {
		hold := &rollout.HoldError{Deletes: 2, Examples: []string{"MyKind apps/a: Deployment apps/a", "MyKind apps/b: Deployment apps/b"}, Templates: []string{"mykind.cue"}}
		held := hold.Error()
		r4 = rc.recordHeld(t, "engine-system", v4, 4, hold)
		out, errOut, code := rolloutCLI("status", "mk")
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, squash(hashes.Replace(out)), "4* <v4> Held - 0 0 0 0\nrevision 4 (*) is held: "+held+"\n`engine rollout resume mk` confirms it\n")

		_, errOut, code = rolloutCLI("undo", "mk")
		assert.Equal(t, 1, code)
		assert.Equal(t, "nothing to undo: revision 4 of MyKind.webapp.my.domain is Held and no object runs it; restore the previous template files to drop it", errOut)

		// The engine sees the approval, rolls the revision out, and clears it.
		out, errOut, code = waitedFor(t, rolloutArgs("resume", "mk", "--wait", "1m"), func(func() string) {
			eventually(t, func() bool { return rc.annotations(t, r4)[contract.AnnotationRolloutApproved] == "true" })
			rc.act(t, r4, revisions.PhaseComplete, 2, "rolled out in 3 waves", contract.AnnotationRolloutApproved)
		})
		require.Equal(t, 0, code, errOut)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		assert.Equal(t, "revision 4 of MyKind.webapp.my.domain approved: its rollout deletes 2 children", lines[0])
		assert.Equal(t, "revision 4: Complete, wave 3/3: rolled out in 3 waves", lines[len(lines)-1])
	})

	t.Run("undo --wait of a complete revision", func(t *testing.T) {
		// Complete until the engine sees the request: not the end of the wait.
		out, errOut, code := waitedFor(t, rolloutArgs("undo", "mk", "--wait", "1m"), func(printed func() string) {
			eventually(t, func() bool { return rc.annotations(t, r4)[contract.AnnotationRolloutUndo] == "true" })
			eventually(t, func() bool { return strings.Contains(printed(), "revision 4: Complete") })
			rc.act(t, r4, revisions.PhaseRolledBack, 2, "undone (engine rollout undo)", contract.AnnotationRolloutUndo)
		})
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, `revision 4 of MyKind.webapp.my.domain undone: the engine returns its objects to revision 2
revision 4: Complete, wave 3/3: rolled out in 3 waves
revision 4: RolledBack, wave 3/3: undone (engine rollout undo)
`, out)
	})

	t.Run("status --watch", func(t *testing.T) {
		v5, v6, v7, v8 := rolloutTemplate(t, 5), rolloutTemplate(t, 6), rolloutTemplate(t, 7), rolloutTemplate(t, 8)
		r5 := rc.record(t, "engine-system", v5, 5, revisions.PhaseProgressing, 0, "wave 1 of 3")
		out, errOut, code := waitedFor(t, rolloutArgs("status", "mk", "--watch"), func(printed func() string) {
			eventually(t, func() bool { return strings.Contains(squash(printed()), "5* "+v5.Hash+" Progressing 1/3") })
			rc.act(t, r5, revisions.PhaseProgressing, 1, "wave 2 of 3")
			eventually(t, func() bool { return strings.Contains(squash(printed()), "5* "+v5.Hash+" Progressing 2/3") })
			rc.act(t, r5, revisions.PhaseComplete, 2, "rolled out in 3 waves")
		})
		require.Equal(t, 0, code, errOut)
		blocks := regexp.MustCompile(`(?m)^--- \d\d:\d\d:\d\d$`).Split(out, -1)
		require.Len(t, blocks, 3, "a table per change, not per poll:\n%s", out)
		assert.Contains(t, squash(blocks[2]), "5* "+v5.Hash+" Complete 3/3")

		r6 := rc.record(t, "engine-system", v6, 6, revisions.PhaseProgressing, 0, "wave 1 of 3")
		_, errOut, code = waitedFor(t, rolloutArgs("status", "mk", "-w"), func(printed func() string) {
			eventually(t, func() bool { return strings.Contains(printed(), "6* ") })
			rc.act(t, r6, revisions.PhaseRolledBack, 0, "2 objects failed: MyKind apps/c: not Ready within 2m")
		})
		assert.Equal(t, 1, code)
		assert.Equal(t, "revision 6 of MyKind.webapp.my.domain rolled back: 2 objects failed: MyKind apps/c: not Ready within 2m", errOut)

		// A newer revision supersedes the watched one: it is watched next.
		r7 := rc.record(t, "engine-system", v7, 7, revisions.PhaseProgressing, 0, "wave 1 of 3")
		out, errOut, code = waitedFor(t, rolloutArgs("status", "mk", "--watch"), func(printed func() string) {
			eventually(t, func() bool { return strings.Contains(printed(), "7* ") })
			rc.act(t, r7, revisions.PhaseSuperseded, 0, "superseded by revision 8")
			r8 := rc.record(t, "engine-system", v8, 8, revisions.PhaseProgressing, 0, "wave 1 of 3")
			eventually(t, func() bool { return strings.Contains(printed(), "8* ") })
			rc.act(t, r8, revisions.PhaseComplete, 2, "rolled out in 3 waves")
		})
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, squash(out), "8* "+v8.Hash+" Complete 3/3")

		_, errOut, code = rolloutCLI("status", "mk", "--watch", "-o", "json")
		assert.Equal(t, 1, code)
		assert.Equal(t, "--watch draws the table: use -o json without --watch", errOut)
	})

	t.Run("errors", func(t *testing.T) {
		_, errOut, code := rolloutCLI("status", "nope")
		assert.Equal(t, 1, code)
		assert.Equal(t, "unknown kind \"nope\": the cluster serves no such resource (is its CRD installed? `kubectl api-resources` lists the kinds)", errOut)

		_, errOut, code = rolloutCLI("history", "deployments")
		assert.Equal(t, 1, code)
		assert.Equal(t, "no revisions of Deployment.apps in any namespace: the engine records one when it serves the kind's template (is it running, with this kind's template?)", errOut)

		_, errOut, code = rolloutCLI("status", "mk", "-o", "yaml")
		assert.Equal(t, 1, code)
		assert.Equal(t, `unknown output format "yaml": use -o json, or no -o for a table`, errOut)

		rc.record(t, "default", v1, 1, revisions.PhaseComplete, 0, "the first revision of the kind")
		_, errOut, code = rolloutCLI("status", "mk")
		assert.Equal(t, 1, code)
		assert.Equal(t, "revisions of MyKind.webapp.my.domain are in several namespaces (default, engine-system): choose the engine's with --revision-namespace", errOut)
		out, errOut, code := rolloutCLI("status", "mk", "--revision-namespace", "engine-system")
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "revisions in namespace engine-system")
	})
}

// waitedFor runs the command line args, which waits, while engine plays the
// engine's part, and returns the command's result. engine is given what the
// command has printed so far.
func waitedFor(t *testing.T, args []string, engine func(printed func() string)) (string, string, int) {
	t.Helper()
	interval := rolloutPollInterval
	rolloutPollInterval = 20 * time.Millisecond
	defer func() { rolloutPollInterval = interval }()
	type result struct {
		errOut string
		code   int
	}
	var out lockedBuffer
	done := make(chan result, 1)
	go func() {
		errOut, code := runTo(t, &out, args...)
		done <- result{errOut, code}
	}()
	engine(out.String)
	select {
	case res := <-done:
		return out.String(), res.errOut, res.code
	case <-time.After(30 * time.Second):
		t.Fatal("the command did not return after the engine acted")
		return "", "", 0
	}
}

// lockedBuffer is a bytes.Buffer one goroutine writes while another reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// eventually polls cond until it holds, for at most 30 seconds.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30s")
		}
		<-tick.C
	}
}

// squash makes a table's columns one space apart.
func squash(s string) string { return regexp.MustCompile(` +`).ReplaceAllString(s, " ") }
