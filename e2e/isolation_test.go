package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cuengine/engine/contract"
)

// calmTemplate is another kind beside the runaways': a ConfigMap that
// carries spec.note.
const calmTemplate = `parent: {apiVersion: "calm.cuengine.dev/v1", kind: "Calm", spec: note: *"" | string}
children: note: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: parent.metadata.name
	data: note: parent.spec.note
}
`

// isolationScene writes the Sprawl, Calm and MyKind (examples/templates)
// templates and installs their CRDs; it returns the templates directory.
func isolationScene(t *testing.T) string {
	t.Helper()
	dir := templatesDir(t, "examples/templates/mykind.cue")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sprawl.cue"), []byte(sprawlTemplate), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "calm.cue"), []byte(calmTemplate), 0o644))
	installCRDs(t, dir)
	return dir
}

// TestRunawayTenantIsolated is issue 51's attack with the default flags
// (but the timeout, 3s as in the issue): one tenant creates 20 Sprawls
// whose evaluation runs away (quad 600: minutes of CPU and gigabytes),
// with no GOMEMLIMIT and with the chart's 900MiB. The evaluations go to
// the evaluator processes (vet warns that quad is unbounded), which are
// killed at the timeout: the engine never exits, the memory of the engine
// and its evaluators stays under 768 MiB, and while the runaways are being
// stopped a new parent of another kind, and a Sprawl of another tenant,
// are each served within 15 s, and a MyKind created 45 s into the attack
// gets its Deployment within 15 s.
func TestRunawayTenantIsolated(t *testing.T) {
	dir := isolationScene(t)
	for name, limit := range map[string]string{"no-GOMEMLIMIT": "", "GOMEMLIMIT-900MiB": "900MiB"} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("GOMEMLIMIT", limit)
			tenant := namespace(t)
			other := tenant + "-other" // another tenant
			kubectl(t, "create", "namespace", other)
			engine := startEngine(t, dir, "--evaluation-timeout", "3s")
			peak := sampleTreeRSS(t, engine)

			applySprawls(t, tenant, "runaway", 20, "quad: 600")
			attacked := time.Now()
			eventually(t, "3 runaways stopped and annotated", 2*time.Minute, func(ctx context.Context) (bool, error) {
				n, err := annotatedRunaways(ctx, tenant)
				return n >= 3, err
			})
			start := time.Now()
			kubectlApply(t, other, "apiVersion: calm.cuengine.dev/v1\nkind: Calm\nmetadata: {name: late}\nspec: {note: served}\n")
			applySprawls(t, other, "healthy", 1, "note: served")
			for _, name := range []string{"late", "healthy-0"} {
				configMapSays(t, other, name, "served", 15*time.Second)
			}
			t.Logf("isolation (GOMEMLIMIT=%q): another kind's parent and another tenant's Sprawl served in %s", limit, time.Since(start).Round(100*time.Millisecond))

			// The healthy parent: a MyKind, 45 s into the attack
			// (the attack's own timing, not a wait for a state), while the
			// tenant's runaways are still being stopped one at a time.
			time.Sleep(time.Until(attacked.Add(45 * time.Second)))
			stopping, err := annotatedRunaways(context.Background(), tenant)
			require.NoError(t, err)
			assert.Less(t, stopping, 20, "runaways still being stopped when the MyKind is created")
			start = time.Now()
			kubectlApply(t, other, "apiVersion: webapp.my.domain/v1\nkind: MyKind\nmetadata: {name: late}\nspec: {deploymentName: late, replicas: 1}\n")
			eventually(t, "the late MyKind's Deployment", 15*time.Second, func(ctx context.Context) (bool, error) {
				_, err := kube.AppsV1().Deployments(other).Get(ctx, "late", metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					return false, nil
				}
				return err == nil, err
			})
			t.Logf("isolation (GOMEMLIMIT=%q): a MyKind created %s into the attack (%d of 20 runaways stopped) got its Deployment in %s",
				limit, start.Sub(attacked).Round(time.Second), stopping, time.Since(start).Round(100*time.Millisecond))
			eventually(t, "every runaway stopped and annotated", 4*time.Minute, func(ctx context.Context) (bool, error) {
				n, err := annotatedRunaways(ctx, tenant)
				return n == 20, err
			})
			select {
			case <-engine.done:
				t.Fatalf("the engine exited: %s", tail(engine.log.String(), 20))
			default:
			}
			got := peak()
			t.Logf("isolation (GOMEMLIMIT=%q): peak memory (Pss) of the engine and its evaluator processes %d MiB", limit, got)
			assert.Less(t, got, int64(768), "the engine and its evaluators, in MiB")
			assert.NotContains(t, engine.log.String(), "hard bar", "the engine never came near its last resort")
		})
	}
}

// configMapSays waits, at most within, for the ConfigMap name to carry
// note.
func configMapSays(t *testing.T, ns, name, note string, within time.Duration) {
	t.Helper()
	eventually(t, name+"'s ConfigMap to say "+note, within, func(ctx context.Context) (bool, error) {
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && cm.Data["note"] == note, err
	})
}

// sampleTreeRSS samples the resident memory of the engine and its
// evaluator processes every 200ms until the returned func is called,
// which stops it and returns the peak in MiB.
func sampleTreeRSS(t *testing.T, p *engineProc) func() int64 {
	return samplePeak(t, 200*time.Millisecond, func() (int64, bool) { return treeRSS(p.cmd.Process.Pid) })
}

// samplePeak calls read every period until the returned func is called,
// which stops it and returns the largest value read.
func samplePeak(t *testing.T, period time.Duration, read func() (int64, bool)) func() int64 {
	var peak atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			if v, ok := read(); ok && v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	var once sync.Once
	done := func() int64 {
		once.Do(func() { close(stop); wg.Wait() })
		return peak.Load()
	}
	t.Cleanup(func() { done() })
	return done
}

// treeRSS is the memory of pid and of its children, in MiB: the sum of
// their proportional set sizes (Pss, /proc/PID/smaps_rollup), in which a
// page they share (the binary's) counts once in all, divided among them;
// VmRSS where the kernel has no smaps_rollup, which counts it in each.
func treeRSS(pid int) (int64, bool) {
	total, ok := memOf(pid)
	if !ok {
		return 0, false
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// "pid (comm) state ppid ...": after the last ')'.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			if mem, ok := memOf(child); ok {
				total += mem
			}
		}
	}
	return total, true
}

// memOf is one process's Pss, else its VmRSS, in MiB.
func memOf(pid int) (int64, bool) {
	if kb, ok := statusField(fmt.Sprintf("/proc/%d/smaps_rollup", pid), "Pss:"); ok {
		return kb >> 10, true
	}
	kb, ok := statusField(fmt.Sprintf("/proc/%d/status", pid), "VmRSS:")
	return kb >> 10, ok
}

// statusField reads the kB value of the line that starts with name.
func statusField(path, name string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb, err == nil
		}
	}
	return 0, false
}

var brambles = schema.GroupVersionResource{Group: "bramble.cuengine.dev", Version: "v1", Resource: "brambles"}

// brambleTemplate is sprawlTemplate for a kind of this test's own (no
// other test's runaways of it remain in the cluster), its ConfigMap
// carrying the number of the template's edit.
func brambleTemplate(edit int) string {
	return fmt.Sprintf(`import "list"

parent: {apiVersion: "bramble.cuengine.dev/v1", kind: "Bramble", spec: {quad: *0 | int & >=0, note: *"" | string}}
children: note: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: parent.metadata.name
	data: {note: parent.spec.note, edit: "%d"}
}
status: sum: list.Sum([for i in list.Range(0, parent.spec.quad, 1) for j in list.Range(0, parent.spec.quad, 1) {i + j}])
`, edit)
}

// TestRunawaysOverTemplateEdits is issue 51's third measure: three
// runaway parents (quad 600) over four edits of their template, default
// flags but --evaluation-timeout 3s. Each edit makes every runaway a
// suspect of the new template, evaluated again in an evaluator process
// and stopped again at the timeout; another tenant's parent of the kind
// follows every edit; the memory of the engine and its evaluators during
// the edits grows by at most 150 MiB over its peak while the runaways were
// first stopped. (In process, before the evaluator processes, each edit
// started evaluations nobody could stop: 473 -> 852 MiB.)
func TestRunawaysOverTemplateEdits(t *testing.T) {
	const runaways, edits = 3, 4
	dir := t.TempDir()
	file := filepath.Join(dir, "bramble.cue")
	require.NoError(t, os.WriteFile(file, []byte(brambleTemplate(0)), 0o644))
	installCRDs(t, dir)
	tenant := namespace(t)
	other := tenant + "-other"
	kubectl(t, "create", "namespace", other)
	engine := startEngine(t, dir, "--evaluation-timeout", "3s")

	var manifest strings.Builder
	for i := range runaways {
		fmt.Fprintf(&manifest, "---\napiVersion: bramble.cuengine.dev/v1\nkind: Bramble\nmetadata: {name: runaway-%d}\nspec: {quad: 600}\n", i)
	}
	kubectlApply(t, tenant, manifest.String())
	kubectlApply(t, other, "apiVersion: bramble.cuengine.dev/v1\nkind: Bramble\nmetadata: {name: healthy}\nspec: {note: served}\n")
	// stopped waits until every runaway carries an overrun annotation
	// for its generation other than the one it had before, and returns
	// the annotations.
	stopped := func(what string, before map[string]string) map[string]string {
		t.Helper()
		now := map[string]string{}
		eventually(t, what, 3*time.Minute, func(ctx context.Context) (bool, error) {
			list, err := dyn.Resource(brambles).Namespace(tenant).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for _, p := range list.Items {
				if v := p.GetAnnotations()[contract.AnnotationEvaluationOverran]; annotatedAt(&p) && v != before[p.GetName()] {
					now[p.GetName()] = v
				}
			}
			return len(now) == runaways, nil
		})
		return now
	}
	followed := func(edit int) {
		t.Helper()
		eventually(t, fmt.Sprintf("the other tenant's Bramble on edit %d", edit), 2*time.Minute, func(ctx context.Context) (bool, error) {
			cm, err := kube.CoreV1().ConfigMaps(other).Get(ctx, "healthy", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return err == nil && cm.Data["edit"] == strconv.Itoa(edit), err
		})
	}
	first := sampleTreeRSS(t, engine)
	annotations := stopped("the runaways stopped and annotated", nil)
	followed(0)
	before := first()
	// The level to grow from: the peak while the runaways were first
	// evaluated and stopped, the same work each edit brings again. Before
	// the evaluator processes each edit added evaluations nobody could
	// stop to those still running, so the edits' peak climbed above it.
	peak := sampleTreeRSS(t, engine)
	for edit := 1; edit <= edits; edit++ {
		start := time.Now()
		require.NoError(t, os.WriteFile(file, []byte(brambleTemplate(edit)), 0o644))
		followed(edit)
		served := time.Since(start)
		annotations = stopped(fmt.Sprintf("the runaways stopped again on edit %d", edit), annotations)
		t.Logf("edit %d: the other tenant's Bramble followed in %s, the %d runaways were stopped again in %s",
			edit, served.Round(100*time.Millisecond), runaways, time.Since(start).Round(100*time.Millisecond))
	}
	select {
	case <-engine.done:
		t.Fatalf("the engine exited: %s", tail(engine.log.String(), 20))
	default:
	}
	got := peak()
	t.Logf("three runaways over %d edits: memory (Pss) of the engine and its evaluator processes at most %d MiB while they were first stopped, at most %d MiB during the edits (%+d)", edits, before, got, got-before)
	assert.Less(t, got-before, int64(150), "growth over the edits, in MiB")
	assert.Less(t, got, int64(768), "the engine and its evaluators, in MiB (the bound of TestRunawayTenantIsolated)")
	assert.NotContains(t, engine.log.String(), "hard bar", "the engine never came near its last resort")
}
