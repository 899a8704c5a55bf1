package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/revisions"
)

// rolloutPolicy makes the MyKind template roll out in three waves.
const rolloutPolicy = `
rollout: {
	strategy:         "Progressive"
	waves:            [1, "25%", "100%"]
	progressDeadline: "20s"
	maxFailures:      0
}
`

// fleetView is what a test sees of the MyKinds and their Deployments.
type fleetView struct {
	revision map[string]int64  // MyKind name: status.templateRevision.number
	ready    map[string]bool   // MyKind name: Ready=True at its generation
	image    map[string]string // MyKind name: its Deployment's image
	deploy   map[string]appsv1.Deployment
}

// onRevision counts the MyKinds (other than skip) on revision n.
func (f fleetView) onRevision(n int64, skip string) int {
	count := 0
	for name, r := range f.revision {
		if r == n && name != skip {
			count++
		}
	}
	return count
}

// TestProgressiveRollout: a template edit rolls out like a Deployment rolls
// out pods, on the full local cluster: in waves, each after the previous
// one is Ready; an edit that never becomes Ready is rolled back at the
// canary; a truncated write is held, not served; pause, resume and undo;
// a pinned MyKind stays where it is; the engine killed mid-rollout finishes
// it after a restart.
func TestProgressiveRollout(t *testing.T) {
	dir := templatesDir(t, "examples/templates/mykind.cue")
	path := filepath.Join(dir, "mykind.cue")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	base := string(b) + rolloutPolicy
	writeFile(t, path, base)
	installCRDs(t, dir)
	ns := namespace(t)
	// Only this test's MyKinds: those other tests leave behind would be
	// part of the fleet that rolls out.
	scope := []string{"--namespace", ns}
	eng := startEngine(t, dir, scope...)
	revNS := revisionNamespace(t)

	// 21 MyKinds; mk-00 is pinned to revision 1, the 20 others roll.
	const pinned = "mk-00"
	var manifest strings.Builder
	for i := range 21 {
		fmt.Fprintf(&manifest, "---\napiVersion: webapp.my.domain/v1\nkind: MyKind\nmetadata: {name: mk-%02d}\nspec: {deploymentName: web-%02d}\n", i, i)
	}
	kubectlApply(t, ns, manifest.String())
	kubectl(t, "-n", ns, "annotate", "mykind", pinned, contract.AnnotationTemplateRevision+"=1")

	w := &rolloutWorld{ns: ns, revNS: revNS, total: 21, skip: pinned}
	fleet, revision, phaseIs, allOn := w.fleet, w.revision, w.phaseIs, w.allOn
	annotateRevision := func(t *testing.T, n int64, annotation string) {
		r, err := revision(context.Background(), n)
		require.NoError(t, err)
		kubectl(t, "-n", revNS, "annotate", "--overwrite", "controllerrevision", r.Name, annotation)
	}
	edit := func(t *testing.T, image, extra string) {
		writeFile(t, path, strings.Replace(base, `"nginx:latest"`, `"`+image+`"`, 1)+extra)
	}

	eventually(t, "21 MyKinds Ready on revision 1", 3*time.Minute, allOn(1, "nginx:latest"))
	outer := t // the engine restarted by a subtest outlives it

	t.Run("an image edit moves 1, then 5, then 20 MyKinds, each wave once the previous one is Ready", func(t *testing.T) {
		edit(t, "nginx:1.27", "")
		allowance := []int{1, 5, 20}
		seen := map[int]bool{}
		eventually(t, "revision 2 complete", 3*time.Minute, func(ctx context.Context) (bool, error) {
			f, err := fleet(ctx)
			if err != nil {
				return false, err
			}
			r, err := revision(ctx, 2) // read after the fleet: its wave is at least the one they moved in
			if err != nil {
				return false, nil
			}
			moved := f.onRevision(2, pinned)
			if r.Phase == revisions.PhaseProgressing {
				require.LessOrEqual(t, moved, allowance[r.Wave], "wave %d (%s) must not move more than %d", r.Wave+1, r.Message, allowance[r.Wave])
			}
			seen[moved] = true
			return r.Phase == revisions.PhaseComplete, nil
		})
		assert.True(t, seen[1] && seen[5], "saw the canary alone, then the first quarter: %v", seen)
		eventually(t, "every MyKind but the pinned one Ready on nginx:1.27", 2*time.Minute, allOn(2, "nginx:1.27"))
		st := rolloutStatus(t, revNS)
		assert.Equal(t, int64(2), st.Target.Number)
		assert.Equal(t, "Complete", st.Target.Phase)
		assert.Equal(t, 20, st.Target.Objects, "every MyKind but the pinned one")
		assert.Equal(t, 20, st.Target.Ready)
		assert.Contains(t, st.Revisions, rolloutRow{Number: 1, Phase: "Complete", Objects: 1, Ready: 1, Pinned: 1, Message: "the first revision of the kind"}, "the pinned MyKind")
	})

	t.Run("an edit that never becomes Ready stops at the canary and rolls it back", func(t *testing.T) {
		before, err := fleet(context.Background())
		require.NoError(t, err)
		edit(t, "nginx:1.28", "\nready: false\n")
		eventually(t, "revision 3 rolled back", 2*time.Minute, phaseIs(3, revisions.PhaseRolledBack))
		r, err := revision(context.Background(), 3)
		require.NoError(t, err)
		assert.Contains(t, r.Message, "1 objects failed (more than maxFailures 0): "+ns+"/mk-")
		assert.Contains(t, r.Message, "not Ready 20s after its update (progressDeadline)")
		eventually(t, "the canary back on revision 2's image", time.Minute, allOn(2, "nginx:1.27"))
		after, err := fleet(context.Background())
		require.NoError(t, err)
		changed := 0
		for name, d := range after.deploy {
			was := before.deploy[name]
			if d.Generation != was.Generation || d.Annotations[contract.AnnotationAppliedHash] != was.Annotations[contract.AnnotationAppliedHash] {
				changed++
				assert.Equal(t, was.Generation+2, d.Generation, "%s: the canary, moved once and back once", name)
			}
		}
		assert.Equal(t, 1, changed, "only the canary's Deployment was touched")
		st := rolloutStatus(t, revNS)
		assert.Equal(t, int64(3), st.Target.Number)
		assert.Equal(t, "RolledBack", st.Target.Phase)
		assert.Contains(t, st.Target.Message, "not Ready 20s after its update (progressDeadline)", "engine rollout status says why")
		eventually(t, "a RevisionRolledBack event", 30*time.Second, func(ctx context.Context) (bool, error) {
			out, err := kubectlErr("-n", revNS, "get", "events", "--field-selector", "reason=RevisionRolledBack", "-o", "jsonpath={.items[*].note}{.items[*].message}")
			return strings.Contains(out, "revision 3 rolled back to revision 2: 1 objects failed"), err
		})
	})

	t.Run("a template written in two halves deletes nothing", func(t *testing.T) {
		before, err := fleet(context.Background())
		require.NoError(t, err)
		full := strings.Replace(base, `"nginx:latest"`, `"nginx:1.27"`, 1)
		half := full[:strings.Index(full, "children:")]
		writeFile(t, path, half)
		eventually(t, "the first half held as revision 4", time.Minute, phaseIs(4, revisions.PhaseHeld))
		code, body := readyz(eng.probe)
		assert.Equal(t, 500, code)
		assert.Contains(t, body, "revision 4 held: the new version of mykind.cue would delete 20 children")
		writeFile(t, path, full)
		eventually(t, "revision 4 superseded by the complete file (revision 2's content, renumbered 5)", time.Minute, phaseIs(4, revisions.PhaseSuperseded))
		eventually(t, "revision 5 complete", time.Minute, phaseIs(5, revisions.PhaseComplete))
		after, err := fleet(context.Background())
		require.NoError(t, err)
		for name, d := range after.deploy {
			assert.Equal(t, before.deploy[name].UID, d.UID, "%s: its Deployment was never deleted", name)
			assert.Equal(t, before.deploy[name].Generation, d.Generation, "%s: nor changed", name)
		}
	})

	t.Run("pause stops a rollout between waves, resume continues it, undo returns the fleet", func(t *testing.T) {
		const rev = 6
		edit(t, "nginx:1.29", "")
		eventually(t, "revision 6 recorded", time.Minute, func(ctx context.Context) (bool, error) {
			_, err := revision(ctx, rev)
			return err == nil, nil
		})
		annotateRevision(t, rev, contract.AnnotationRolloutPaused+"=true")
		var paused revisions.Revision
		eventually(t, "the rollout paused with its wave Ready", 2*time.Minute, func(ctx context.Context) (bool, error) {
			r, err := revision(ctx, rev)
			paused = r
			moved, ready := 0, 0
			_, scanErr := fmt.Sscanf(strings.TrimPrefix(r.Message, fmt.Sprintf("paused at wave %d of 3: ", r.Wave+1)), "%d of 20 objects moved, %d Ready", &moved, &ready)
			return err == nil && scanErr == nil && moved > 0 && moved == ready, nil
		})
		f, err := fleet(context.Background())
		require.NoError(t, err)
		assert.Equal(t, []int{1, 5, 20}[paused.Wave], f.onRevision(rev, pinned), "paused: no more than the wave (%s)", paused.Message)
		assert.Less(t, paused.Wave, 2, "paused before the last wave")

		kubectl(t, "-n", revNS, "annotate", "controllerrevision", paused.Name, contract.AnnotationRolloutPaused+"-")
		eventually(t, "revision 6 complete after resume", 3*time.Minute, phaseIs(rev, revisions.PhaseComplete))
		eventually(t, "every MyKind on nginx:1.29", 2*time.Minute, allOn(rev, "nginx:1.29"))

		annotateRevision(t, rev, contract.AnnotationRolloutUndo+"=true")
		eventually(t, "revision 6 rolled back", time.Minute, phaseIs(rev, revisions.PhaseRolledBack))
		eventually(t, "every MyKind back on revision 5 (nginx:1.27)", 2*time.Minute, allOn(5, "nginx:1.27"))
	})

	t.Run("the engine killed mid-rollout finishes it after a restart, moving each MyKind once", func(t *testing.T) {
		before, err := fleet(context.Background())
		require.NoError(t, err)
		edit(t, "nginx:1.30", "")
		eventually(t, "the canary moved to revision 7", time.Minute, func(ctx context.Context) (bool, error) {
			f, err := fleet(ctx)
			return err == nil && f.onRevision(7, pinned) >= 1, err
		})
		eng.kill()
		eng = launchEngine(t, outer, dir, scope...)
		eventually(t, "revision 7 complete", 3*time.Minute, phaseIs(7, revisions.PhaseComplete))
		eventually(t, "every MyKind on nginx:1.30", 2*time.Minute, allOn(7, "nginx:1.30"))
		after, err := fleet(context.Background())
		require.NoError(t, err)
		for name, d := range after.deploy {
			if name == pinned {
				continue
			}
			assert.Equal(t, before.deploy[name].Generation+1, d.Generation, "%s: one image change, never rolled twice", name)
		}
	})

	t.Run("the pinned MyKind stayed on revision 1 throughout", func(t *testing.T) {
		f, err := fleet(context.Background())
		require.NoError(t, err)
		assert.EqualValues(t, 1, f.revision[pinned])
		assert.Equal(t, "nginx:latest", f.image[pinned])
		assert.EqualValues(t, 1, f.deploy[pinned].Generation, "never changed")

		// Unpinned, it follows the fleet.
		kubectl(t, "-n", ns, "annotate", "mykind", pinned, contract.AnnotationTemplateRevision+"-")
		eventually(t, "the unpinned MyKind on revision 7", 2*time.Minute, func(ctx context.Context) (bool, error) {
			f, err := fleet(ctx)
			return err == nil && f.revision[pinned] == 7 && f.image[pinned] == "nginx:1.30", err
		})
	})
}

// rolloutWorld reads a rollout test's MyKinds, Deployments and revisions.
type rolloutWorld struct {
	ns, revNS string
	total     int    // MyKinds in ns
	skip      string // a pinned MyKind, left out of allOn
}

func (w *rolloutWorld) fleet(ctx context.Context) (fleetView, error) {
	f := fleetView{revision: map[string]int64{}, ready: map[string]bool{}, image: map[string]string{}, deploy: map[string]appsv1.Deployment{}}
	list, err := dyn.Resource(myKinds).Namespace(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return f, err
	}
	deploys, err := kube.AppsV1().Deployments(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return f, err
	}
	byName := map[string]appsv1.Deployment{}
	for _, d := range deploys.Items {
		byName[d.Name] = d
	}
	for i := range list.Items {
		mk := &list.Items[i]
		f.revision[mk.GetName()], _ = contract.ParentRevision(mk)
		f.ready[mk.GetName()] = isReady(mk)
		d := byName[strings.Replace(mk.GetName(), "mk-", "web-", 1)]
		f.deploy[mk.GetName()] = d
		if len(d.Spec.Template.Spec.Containers) > 0 {
			f.image[mk.GetName()] = d.Spec.Template.Spec.Containers[0].Image
		}
	}
	return f, nil
}

// revision reads revision n of MyKind.
func (w *rolloutWorld) revision(ctx context.Context, n int64) (revisions.Revision, error) {
	list, err := kube.AppsV1().ControllerRevisions(w.revNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return revisions.Revision{}, err
	}
	for i := range list.Items {
		if r := revisions.RevisionOf(&list.Items[i]); r.Number == n {
			return r, nil
		}
	}
	return revisions.Revision{}, fmt.Errorf("revision %d not recorded yet", n)
}

func (w *rolloutWorld) phaseIs(n int64, phase revisions.Phase) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		r, err := w.revision(ctx, n)
		return err == nil && r.Phase == phase, nil
	}
}

// allOn: every MyKind but the skipped one Ready on revision n, its
// Deployment on image.
func (w *rolloutWorld) allOn(n int64, image string) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		f, err := w.fleet(ctx)
		if err != nil || len(f.revision) != w.total {
			return false, err
		}
		for name := range f.revision {
			if name != w.skip && (f.revision[name] != n || f.image[name] != image || !f.ready[name]) {
				return false, nil
			}
		}
		return true, nil
	}
}

// rolloutRow is a revision in `engine rollout status -o json`.
type rolloutRow struct {
	Number  int64  `json:"number"`
	Phase   string `json:"phase"`
	Objects int    `json:"objects"`
	Ready   int    `json:"ready"`
	Pinned  int    `json:"pinned"`
	Message string `json:"message,omitempty"`
}

// rolloutStatus runs `engine rollout status mk -o json`, as a user would.
func rolloutStatus(t *testing.T, revNS string) (st struct {
	Target    rolloutRow   `json:"target"`
	Revisions []rolloutRow `json:"revisions"`
}) {
	t.Helper()
	out, err := runEngine("rollout", "status", "mk", "--kubeconfig", cluster.Kubeconfig, "--revision-namespace", revNS, "-o", "json")
	require.NoError(t, err, out)
	require.NoError(t, json.Unmarshal([]byte(out), &st), out)
	return st
}

// isReady reports Ready=True at the object's generation.
func isReady(obj *unstructured.Unstructured) bool {
	gen, _, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
	if gen != obj.GetGeneration() {
		return false
	}
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" {
			return m["status"] == "True"
		}
	}
	return false
}

// TestRolloutLeaderFailover: two engines with leader election; the leader
// is SIGKILLed in the middle of a wave, and the other one carries the
// rollout on from where it was, moving each MyKind once.
func TestRolloutLeaderFailover(t *testing.T) {
	dir := templatesDir(t, "examples/templates/mykind.cue")
	path := filepath.Join(dir, "mykind.cue")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	base := string(b) + strings.Replace(rolloutPolicy, `[1, "25%", "100%"]`, `[1, "50%", "100%"]`, 1)
	writeFile(t, path, base)
	installCRDs(t, dir)
	ns := namespace(t)
	election := []string{"--namespace", ns, "--leader-elect", "--leader-election-namespace", ns, "--leader-election-id", "engine-rollout",
		"--leader-election-lease-duration", "4s", "--leader-election-renew-deadline", "3s", "--leader-election-retry-period", "500ms"}
	first := startEngine(t, dir, election...)
	leader := func(ctx context.Context) (string, error) {
		l, err := kube.CoordinationV1().Leases(ns).Get(ctx, "engine-rollout", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return "", err
		}
		return *l.Spec.HolderIdentity, nil
	}
	var firstLeader string
	eventually(t, "the first engine to lead", 30*time.Second, func(ctx context.Context) (bool, error) {
		firstLeader, err = leader(ctx)
		return firstLeader != "", err
	})
	startEngine(t, dir, election...)

	const n = 8
	var manifest strings.Builder
	for i := range n {
		fmt.Fprintf(&manifest, "---\napiVersion: webapp.my.domain/v1\nkind: MyKind\nmetadata: {name: mk-%02d}\nspec: {deploymentName: web-%02d}\n", i, i)
	}
	kubectlApply(t, ns, manifest.String())
	w := &rolloutWorld{ns: ns, revNS: revisionNamespace(t), total: n}
	eventually(t, "the MyKinds Ready on revision 1", 2*time.Minute, w.allOn(1, "nginx:latest"))
	before, err := w.fleet(context.Background())
	require.NoError(t, err)

	// Both engines see the edit (every replica serves the files); only the
	// leader rolls it out.
	writeFile(t, path, strings.Replace(base, `"nginx:latest"`, `"nginx:1.27"`, 1))
	eventually(t, "the canary moved to revision 2", time.Minute, func(ctx context.Context) (bool, error) {
		f, err := w.fleet(ctx)
		return err == nil && f.onRevision(2, "") >= 1, err
	})
	first.kill()
	eventually(t, "the second engine to lead", 30*time.Second, func(ctx context.Context) (bool, error) {
		h, err := leader(ctx)
		return h != "" && h != firstLeader, err
	})
	eventually(t, "revision 2 complete", 3*time.Minute, w.phaseIs(2, revisions.PhaseComplete))
	eventually(t, "every MyKind on nginx:1.27", 2*time.Minute, w.allOn(2, "nginx:1.27"))
	after, err := w.fleet(context.Background())
	require.NoError(t, err)
	for name, d := range after.deploy {
		assert.Equal(t, before.deploy[name].Generation+1, d.Generation, "%s: moved once", name)
	}
}
