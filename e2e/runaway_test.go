package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cuengine/engine/contract"
)

var sprawls = schema.GroupVersionResource{Group: "sprawl.cuengine.dev", Version: "v1", Resource: "sprawls"}

// sprawlTemplate is the reliability probe's runaway (issue 35): a status
// comprehension over list.Range(0, spec.quad) squared, whose evaluation
// grows with the spec; with quad 0 it is a healthy object whose ConfigMap
// carries spec.note.
const sprawlTemplate = `import "list"

parent: {apiVersion: "sprawl.cuengine.dev/v1", kind: "Sprawl", spec: {quad: *0 | int & >=0, note: *"" | string}}
children: note: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: parent.metadata.name
	data: note: parent.spec.note
}
status: sum: list.Sum([for i in list.Range(0, parent.spec.quad, 1) for j in list.Range(0, parent.spec.quad, 1) {i + j}])
`

// The engine's memory settings, the chart's defaults for a 512Mi
// container: GOMEMLIMIT nine tenths of the limit, --max-evaluation-heap
// three quarters of GOMEMLIMIT (suspects refused past it; every object
// refused a sixth over it, 402 MiB).
const (
	runawayGoMemLimit = "460MiB"
	runawayHeapBar    = "345Mi"
)

// runawayQuad is the runaways' spec.quad, 150 unless ENGINE_RUNAWAY_QUAD
// says otherwise. The probe's 600 runs for over 18 minutes and grows to
// 2.9 GB per evaluation: the budget's cap keeps at most nine of them
// running (3M + W - 1 with M = 2 and 4 workers), but none ends within the
// test, so the runaways past the cap are never evaluated, annotated, nor
// so remembered across the restart, and the few running grow past any
// bound the budget sets (it refuses new evaluations; CUE cannot stop one
// that runs): ENGINE_RUNAWAY_QUAD=600 reproduces that, and fails
// (docs/operations.md, The budget's worst case, has its figures). 150
// takes one to ten seconds of a core (on this shared 2-core machine) and
// about 55 MiB, far past the 500 ms timeout, so all 50 overrun and end
// within minutes.
func runawayQuad() int {
	if q, err := strconv.Atoi(os.Getenv("ENGINE_RUNAWAY_QUAD")); err == nil && q > 0 {
		return q
	}
	return 150
}

// TestRunawayParentsBoundedInMemory: 50 runaway parents created at once
// beside 20 healthy ones (issue 35's first "Done when"). The engine's RSS
// is sampled every second and logged with the evaluations past the
// timeout; a healthy parent's change is applied meanwhile; every runaway
// is annotated with the template it overran on. A restarted engine
// refuses all 50 without evaluating them (Synced=False
// EvaluationBudgetExceeded, Stalled), starts no evaluation past the
// timeout, and its RSS stays near the first engine's baseline.
func TestRunawayParentsBoundedInMemory(t *testing.T) {
	const healthy, runaways = 20, 50
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sprawl.cue"), []byte(sprawlTemplate), 0o644))
	installCRDs(t, dir)
	ns := namespace(t)
	t.Setenv("GOMEMLIMIT", runawayGoMemLimit)
	start := func() (*engineProc, string) {
		metrics := freeAddr(t)
		return startEngine(t, dir, "--evaluation-timeout", "500ms", "--max-evaluation-heap", runawayHeapBar,
			"--metrics-bind-address", metrics, "--metrics-secure=false"), metrics
	}
	engine, metrics := start()

	var manifest strings.Builder
	for i := range healthy {
		fmt.Fprintf(&manifest, "---\napiVersion: sprawl.cuengine.dev/v1\nkind: Sprawl\nmetadata: {name: healthy-%d}\nspec: {note: a}\n", i)
	}
	kubectlApply(t, ns, manifest.String())
	sprawlsConverged(t, ns, "the healthy parents", healthy)
	baseline := rssMiB(t, engine)
	t.Logf("runaway: baseline RSS %d MiB with %d healthy parents", baseline, healthy)

	manifest.Reset()
	for i := range runaways {
		fmt.Fprintf(&manifest, "---\napiVersion: sprawl.cuengine.dev/v1\nkind: Sprawl\nmetadata: {name: runaway-%d}\nspec: {quad: %d}\n", i, runawayQuad())
	}
	s := sampleEngine(t, "first engine", engine, metrics, ns)
	kubectlApply(t, ns, manifest.String())
	setNote(t, ns, "healthy-0", "b")
	eventually(t, "healthy-0's ConfigMap to say b", 30*time.Second, func(ctx context.Context) (bool, error) {
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "healthy-0", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && cm.Data["note"] == "b", err
	})
	s.mark("healthy-0's change applied")
	eventually(t, "every runaway annotated with the template it overran on", 4*time.Minute, func(ctx context.Context) (bool, error) {
		n, err := annotatedRunaways(ctx, ns)
		return n == runaways, err
	})
	first := s.stop()
	// The bound: GOMEMLIMIT, which the runtime holds the heap under while
	// what is live fits (the budget starts no evaluation past 402 MiB of
	// live heap), plus what the evaluations admitted before the bar was
	// crossed allocate after it: at most 3M + W - 1 = 9 of them, about 60
	// MiB each at quad 150 (`engine render` on one: 129 MiB of RSS against
	// 75 with quad 0), 540 MiB; the rest of the process (stacks, the
	// runtime's own) is in the baseline. 460 + 540 = 1000 MiB.
	const bound = 1000
	t.Logf("runaway: first engine: peak RSS %d MiB (bound %d), peak evaluations past the timeout %v", first.peakRSS, bound, first.peakOverrunning)
	assert.Less(t, first.peakRSS, int64(bound), "the engine's RSS with %d runaways", runaways)
	assert.LessOrEqual(t, first.peakOverrunning, float64(9), "3M + W - 1 evaluations past the timeout at most")

	engine.stop()
	engine, metrics = start()
	s = sampleEngine(t, "restarted engine", engine, metrics, ns)
	setNote(t, ns, "healthy-1", "c")
	eventually(t, "healthy-1's ConfigMap to say c", 30*time.Second, func(ctx context.Context) (bool, error) {
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "healthy-1", metav1.GetOptions{})
		return err == nil && cm.Data["note"] == "c", err
	})
	const refusal = "EvaluationBudgetExceeded: this object's evaluation ran past --evaluation-timeout before, with this template and this generation of its spec (annotation engine.cuengine.dev/evaluation-overran); it is not evaluated again until its spec or the template changes: change its spec, or remove the annotation to retry"
	eventually(t, "every runaway refused without evaluating", 2*time.Minute, func(ctx context.Context) (bool, error) {
		for i := range runaways {
			p, err := dyn.Resource(sprawls).Namespace(ns).Get(ctx, fmt.Sprintf("runaway-%d", i), metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conds := conditionsOf(p)
			if conds["Synced"] != "False "+refusal || !strings.HasPrefix(conds["Stalled"], "True ") {
				return false, fmt.Errorf("%s: Synced %q, Stalled %q", p.GetName(), conds["Synced"], conds["Stalled"])
			}
		}
		return true, nil
	})
	sprawlsConverged(t, ns, "the healthy parents after the restart", healthy)
	second := s.stop()
	scrape := scrapePlain(t, metrics)
	timeouts := metricSum(scrape, "engine_limit_exceeded_total", `limit="EvaluationTimeout"`)
	remembered := metricSum(scrape, "engine_evaluations_refused_total", `why="remembered"`)
	evaluated := metricSum(scrape, "engine_template_evaluation_duration_seconds_count", "")
	t.Logf("runaway: restarted engine: peak RSS %d MiB (baseline %d), peak evaluations past the timeout %v, evaluations %v, timeouts %v, refused as remembered %v",
		second.peakRSS, baseline, second.peakOverrunning, evaluated, timeouts, remembered)
	assert.Zero(t, second.peakOverrunning, "the restarted engine evaluates no runaway")
	assert.Zero(t, timeouts, "no evaluation of the restarted engine ran past the timeout")
	assert.GreaterOrEqual(t, remembered, float64(runaways), "each runaway refused without evaluating")
	// Near the baseline: the restarted engine holds the same 70 parents
	// and 20 ConfigMaps and evaluates only the healthy ones; 64 MiB is
	// room for the collector's slack, not for a single runaway's 60 MiB
	// evaluation on top of it.
	assert.Less(t, second.peakRSS, baseline+64, "the restarted engine's RSS stays near the baseline")
}

// setNote changes a Sprawl's spec.note.
func setNote(t *testing.T, ns, name, note string) {
	t.Helper()
	_, err := dyn.Resource(sprawls).Namespace(ns).Patch(context.Background(), name, types.MergePatchType, []byte(`{"spec":{"note":"`+note+`"}}`), metav1.PatchOptions{})
	require.NoError(t, err)
}

// sprawlsConverged waits until the n healthy Sprawls are Synced and Ready.
func sprawlsConverged(t *testing.T, ns, what string, n int) {
	t.Helper()
	eventually(t, what+" converged", 2*time.Minute, func(ctx context.Context) (bool, error) {
		for i := range n {
			p, err := dyn.Resource(sprawls).Namespace(ns).Get(ctx, fmt.Sprintf("healthy-%d", i), metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if msg := parentProblem(p); msg != "" {
				return false, fmt.Errorf("%s: %s", p.GetName(), msg)
			}
		}
		return true, nil
	})
}

// annotatedRunaways counts the runaways annotated with the template they
// overran on, for their current generation.
func annotatedRunaways(ctx context.Context, ns string) (int, error) {
	list, err := dyn.Resource(sprawls).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range list.Items {
		if strings.HasPrefix(p.GetName(), "runaway-") && annotatedAt(&p) {
			n++
		}
	}
	return n, nil
}

func annotatedAt(p *unstructured.Unstructured) bool {
	v := p.GetAnnotations()[contract.AnnotationEvaluationOverran]
	return strings.HasSuffix(v, ", generation "+strconv.FormatInt(p.GetGeneration(), 10))
}

// rssMiB reads the engine process's resident set (VmRSS), in MiB.
func rssMiB(t *testing.T, p *engineProc) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	require.NoError(t, err)
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			require.NoError(t, err)
			return kb >> 10
		}
	}
	require.Fail(t, "no VmRSS in /proc/PID/status")
	return 0
}

// scrapePlain GETs the engine's plain-HTTP /metrics (--metrics-secure=false).
func scrapePlain(t *testing.T, addr string) string {
	t.Helper()
	body, err := scrapePlainErr(addr)
	require.NoError(t, err)
	return body
}

func scrapePlainErr(addr string) (string, error) {
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return string(b), nil
}

// metricSum sums the samples of a metric whose labels contain label ("":
// all of them) in a Prometheus text scrape.
func metricSum(scrape, name, label string) float64 {
	sum := 0.0
	sc := bufio.NewScanner(strings.NewReader(scrape))
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest == "" || (rest[0] != '{' && rest[0] != ' ')) || !strings.Contains(rest, label) {
			continue
		}
		f := strings.Fields(rest[strings.LastIndex(rest, "}")+1:])
		if len(f) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(f[0], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// engineSampler logs the engine's RSS, the evaluations past the timeout,
// the timeouts and refusals so far and the runaways annotated, every
// second, keeping the peaks.
type engineSampler struct {
	t      *testing.T
	what   string
	begin  time.Time
	stopCh chan struct{}
	done   chan struct{}

	mu              sync.Mutex
	peakRSS         int64
	peakOverrunning float64
}

type samplePeaks struct {
	peakRSS         int64
	peakOverrunning float64
}

func sampleEngine(t *testing.T, what string, p *engineProc, metrics, ns string) *engineSampler {
	s := &engineSampler{t: t, what: what, begin: time.Now(), stopCh: make(chan struct{}), done: make(chan struct{})}
	pid := p.cmd.Process.Pid
	go func() {
		defer close(s.done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			s.sample(pid, metrics, ns)
			select {
			case <-s.stopCh:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() {
		select {
		case <-s.stopCh:
		default:
			s.stop()
		}
	})
	return s
}

func (s *engineSampler) sample(pid int, metrics, ns string) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return // the process ended
	}
	var rss int64
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			rss = kb >> 10
		}
	}
	scrape, err := scrapePlainErr(metrics)
	if err != nil {
		s.t.Logf("runaway: %s: %3.0fs RSS %4d MiB (metrics: %v)", s.what, time.Since(s.begin).Seconds(), rss, err)
		return
	}
	overrunning := metricSum(scrape, "engine_evaluations_overrunning", "")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	annotated, _ := annotatedRunaways(ctx, ns)
	s.t.Logf("runaway: %s: %3.0fs RSS %4d MiB, past the timeout now %v, timeouts %v, refused: budget %v remembered %v, runaways annotated %d",
		s.what, time.Since(s.begin).Seconds(), rss, overrunning,
		metricSum(scrape, "engine_limit_exceeded_total", `limit="EvaluationTimeout"`),
		metricSum(scrape, "engine_evaluations_refused_total", `why="budget"`),
		metricSum(scrape, "engine_evaluations_refused_total", `why="remembered"`), annotated)
	s.mu.Lock()
	s.peakRSS, s.peakOverrunning = max(s.peakRSS, rss), max(s.peakOverrunning, overrunning)
	s.mu.Unlock()
}

// mark logs an event among the samples.
func (s *engineSampler) mark(event string) {
	s.t.Logf("runaway: %s: %3.0fs %s", s.what, time.Since(s.begin).Seconds(), event)
}

func (s *engineSampler) stop() samplePeaks {
	close(s.stopCh)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return samplePeaks{peakRSS: s.peakRSS, peakOverrunning: s.peakOverrunning}
}
