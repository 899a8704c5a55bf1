package harness

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Controller names.
const (
	Engine    = "engine"
	Reference = "reference"
	// Kro is kro with Workers workers (--dynamic-controller-concurrent-reconciles),
	// its other flags at their defaults.
	Kro = "kro"
	// KroDefaults is kro with all its defaults: 1 worker, a client limit
	// of 100 requests per second.
	KroDefaults = "kro-defaults"
)

// Peers are the controllers a peer name adds (Config.Peers).
var Peers = map[string][]string{Kro: {Kro, KroDefaults}}

// controllerOrder is the order of the report's columns.
var controllerOrder = []string{Engine, Reference, Kro, KroDefaults}

// Config configures a benchmark invocation.
type Config struct {
	// Root is the repository root. bin/ there holds the engine and the
	// control plane; bin/reference is built there.
	Root string
	// Templates is the engine's templates directory (copied per run, since
	// phase (e) edits it); empty means examples/templates under Root.
	Templates string
	// N is the number of parents.
	N int
	// Rounds is how many times each controller runs, alternating.
	Rounds int
	// Workers is each controller's --max-concurrent-reconciles.
	Workers int
	// EngineArgs are extra flags for the engine, e.g. --requeue-qps 500.
	EngineArgs []string
	// EngineEnv is added to the engine's environment, e.g.
	// GOMEMLIMIT=921MiB (what the chart sets under a 1Gi limit).
	EngineEnv []string
	// MemoryLimit, when above 0, runs each controller process in a memory
	// cgroup of its own with this limit in bytes, as a container's memory
	// limit would hold it (the harness must run as root).
	MemoryLimit int64
	// EngineBin is the engine binary; empty means bin/engine under Root.
	// Another build (such as main's) gives the before of a change.
	EngineBin string
	// UpgradeFrom, with Scale, is an earlier engine binary: the engine
	// runs first as it, with the CRDs it generates, and its restart is an
	// upgrade to EngineBin (its CRDs updated first, as the upgrade steps
	// of docs/operations.md do).
	UpgradeFrom string
	// Clients is the harness's request concurrency.
	Clients int
	// Controllers lists the controllers to run (Engine, Reference, Kro,
	// KroDefaults).
	Controllers []string
	// KroArgs are extra flags for both kro runs.
	KroArgs []string
	// Shards, when set, turns the run into the sharding benchmark: per
	// round, the engine without sharding, then for each count the engine
	// with --sharding over that many replicas, phases (a) to (d) each.
	// Controllers is then ignored.
	Shards []int
	// Scale turns the run into the scale benchmark (scale.go): N parents
	// with replicas 0, each controller with its default flags, time until
	// every parent is Ready, memory and CPU, then a restart with the N
	// parents in place. Rounds, Workers and Raw are then ignored.
	Scale bool
	// Raw adds, per round, a run of the harness creating the Deployments
	// itself, with no controller.
	Raw bool
	// PhaseTimeout bounds each phase.
	PhaseTimeout time.Duration
	// ReloadTimeout is how long phase (e) waits for the first Deployment
	// with the new image before reporting hot reload as not available.
	ReloadTimeout time.Duration
	// LogDir receives each controller run's log and templates copy; empty
	// means a new temporary directory, which is kept.
	LogDir string
	// Progress receives progress lines; nil means os.Stderr.
	Progress io.Writer
}

// Harness runs the benchmark.
type Harness struct {
	cfg     Config
	log     *logger
	crds    []*apiextensionsv1.CustomResourceDefinition // MyKind's, from the engine
	oldCRDs []*apiextensionsv1.CustomResourceDefinition // from Config.UpgradeFrom
	kroCRDs []*apiextensionsv1.CustomResourceDefinition // kro's own
	kroVer  string                                      // kro's version
	// bins maps a controller binary to the copy the runs execute.
	bins map[string]string
	// enginePprof tells whether the engine build has --pprof-bind-address
	// (an older one, run for a before and after, may not).
	enginePprof bool
}

// controllerSpec says how to run one controller under test.
type controllerSpec struct {
	name string
	bin  string
	// crds are installed on the fresh control plane.
	crds []*apiextensionsv1.CustomResourceDefinition
	// templates: the controller watches a copy of the templates directory.
	templates bool
	args      func(kubeconfig, templates string) []string
	// env is added to the controller's environment.
	env []string
	// replicas > 0 starts that many processes, replicaArgs(i) added to
	// the args of replica i; 0 starts one with args alone.
	replicas    int
	replicaArgs func(i int) []string
	// prepare, if set, runs once the controller started and before the
	// harness watches MyKinds (kro generates their CRD).
	prepare func(ctx context.Context, e *env, alive func() error) error
	// edit, if set, is phase (e): the image edit in the controller's
	// template.
	edit func(ctx context.Context, e *env, templates string) error
	// evaluations, if set, reads how many template evaluations the
	// controller made so far, and how many its memory answered.
	evaluations func(ctx context.Context) (evaluationCounts, error)
	// pprof, if set, is the address of the controller's /debug/pprof
	// endpoints (--pprof-bind-address), whose heap profile the harness
	// reads at the end of the run.
	pprof string
}

// Run runs every round and returns the report. On failure it returns the
// report of the runs that completed, and the error.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	h, err := newHarness(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if h.cfg.Scale {
		return h.runScale(ctx)
	}
	rep := newReport(h.cfg)
	rep.KroVersion = h.kroVer
	for round := 1; round <= h.cfg.Rounds; round++ {
		for _, name := range h.order(round) {
			res, err := h.runController(ctx, h.spec(name), round)
			if err != nil {
				return rep, fmt.Errorf("%s, round %d: %w", name, round, err)
			}
			rep.Runs = append(rep.Runs, res)
		}
		if h.cfg.Raw {
			d, err := h.runRaw(ctx, round)
			if err != nil {
				return rep, fmt.Errorf("raw, round %d: %w", round, err)
			}
			rep.Raw = append(rep.Raw, d)
		}
	}
	rep.LoadEnd = loadAverage()
	return rep, nil
}

// newHarness checks the configuration, builds bin/reference and reads the
// CRDs.
func newHarness(ctx context.Context, cfg Config) (*Harness, error) {
	if cfg.Progress == nil {
		cfg.Progress = os.Stderr
	}
	if cfg.Templates == "" {
		cfg.Templates = filepath.Join(cfg.Root, "examples", "templates")
	}
	if cfg.N < 10 || cfg.Rounds < 1 || cfg.Workers < 1 || cfg.Clients < 1 {
		return nil, fmt.Errorf("need N >= 10 and at least one round, worker and client")
	}
	if cfg.EngineBin == "" {
		cfg.EngineBin = filepath.Join(cfg.Root, "bin", Engine)
	}
	if cfg.LogDir == "" {
		dir, err := os.MkdirTemp("", "cuengine-bench-")
		if err != nil {
			return nil, fmt.Errorf("creating the log directory: %w", err)
		}
		cfg.LogDir = dir
	}
	if len(cfg.Shards) > 0 {
		if err := checkShards(cfg.Shards); err != nil {
			return nil, err
		}
		cfg.Controllers = shardedRuns(cfg.Shards)
	}
	for _, name := range cfg.Controllers {
		if !slices.Contains(controllerOrder, name) && !isSharded(name) {
			return nil, fmt.Errorf("unknown controller %q: want one of %s", name, strings.Join(controllerOrder, ", "))
		}
	}
	h := &Harness{cfg: cfg, log: &logger{w: cfg.Progress}}
	engineBin := cfg.EngineBin
	if _, err := os.Stat(engineBin); err != nil {
		return nil, fmt.Errorf("%s not found (run `make build`): %w", engineBin, err)
	}
	if err := h.buildReference(ctx); err != nil {
		return nil, err
	}
	h.enginePprof = hasFlag(ctx, engineBin, "--pprof-bind-address", "run", "--help")
	if !h.enginePprof {
		h.log.printf("%s has no --pprof-bind-address: no heap profile of the engine", engineBin)
	}
	crds, err := loadCRDs(ctx, engineBin, cfg.Templates)
	if err != nil {
		return nil, err
	}
	h.crds = crds
	bins := []string{engineBin, filepath.Join(cfg.Root, "bin", Reference)}
	if cfg.UpgradeFrom != "" {
		if !cfg.Scale {
			return nil, fmt.Errorf("an upgrade (-upgrade-from) is measured by the scale benchmark only (-scale)")
		}
		if h.oldCRDs, err = loadCRDs(ctx, cfg.UpgradeFrom, cfg.Templates); err != nil {
			return nil, err
		}
		bins = append(bins, cfg.UpgradeFrom)
	}
	if slices.Contains(cfg.Controllers, Kro) || slices.Contains(cfg.Controllers, KroDefaults) {
		kroBin := filepath.Join(cfg.Root, "bin", "kro")
		if _, err := os.Stat(kroBin); err != nil {
			return nil, fmt.Errorf("bin/kro not found (run `hack/build-assets.sh kro`): %w", err)
		}
		if h.kroCRDs, h.kroVer, err = loadKroCRDs(ctx, cfg.Root); err != nil {
			return nil, err
		}
		bins = append(bins, kroBin)
	}
	if h.bins, err = copyBinaries(bins, filepath.Join(cfg.LogDir, "bin")); err != nil {
		return nil, err
	}
	if cfg.Scale {
		h.log.printf("scale: N=%d clients=%d runs=%s, default flags; logs in %s", cfg.N, cfg.Clients, strings.Join(cfg.Controllers, ","), cfg.LogDir)
		return h, nil
	}
	h.log.printf("N=%d rounds=%d workers=%d clients=%d runs=%s; logs in %s", cfg.N, cfg.Rounds, cfg.Workers, cfg.Clients, strings.Join(cfg.Controllers, ","), cfg.LogDir)
	return h, nil
}

// hasFlag reports whether the help that bin prints for args mentions flag.
func hasFlag(ctx context.Context, bin, flag string, args ...string) bool {
	out, _ := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	return strings.Contains(string(out), flag)
}

// buildReference builds bin/reference from bench/reference.
func (h *Harness) buildReference(ctx context.Context) error {
	h.log.printf("building bin/reference")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join("bin", Reference), "./bench/reference")
	cmd.Dir = h.cfg.Root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building bin/reference: %w\n%s", err, out)
	}
	return nil
}

// copyBinaries copies each controller binary into dir and returns where
// each went. Every run executes a copy: a binary as the Go linker wrote it
// (through mmap) shows more file-backed pages in the RSS of a process than
// a plain copy of it (the engine: 6 MiB more at start-up, up to 16-19 MiB
// more at the end of a run), which would favour whichever side was built
// longer ago.
func copyBinaries(bins []string, dir string) (map[string]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(bins))
	for i, src := range bins {
		dst := filepath.Join(dir, fmt.Sprintf("%d-%s", i, filepath.Base(src)))
		if err := copyFile(src, dst); err != nil {
			return nil, fmt.Errorf("copying %s: %w", src, err)
		}
		out[src] = dst
	}
	return out, nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// order alternates which controller goes first, so neither always runs on
// the fresher machine.
func (h *Harness) order(round int) []string {
	out := append([]string(nil), h.cfg.Controllers...)
	if round%2 == 0 {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out
}

// spec returns how to run a controller.
func (h *Harness) spec(name string) controllerSpec {
	if replicas, ok := shardCount(name); ok {
		return h.shardedSpec(name, replicas)
	}
	workers := strconv.Itoa(h.cfg.Workers)
	bin := filepath.Join(h.cfg.Root, "bin", name)
	switch name {
	case Engine:
		addr, err := freeAddress()
		if err != nil {
			h.log.printf("  no free port for the engine's metrics (%v): its evaluations are not counted", err)
			addr = ""
		}
		pprof := ""
		if h.enginePprof {
			pprof = h.pprofAddress(name)
		}
		s := h.engineSpec(cmp.Or(addr, "0"), pprof)
		if addr != "" {
			s.evaluations = func(ctx context.Context) (evaluationCounts, error) {
				return scrapeEvaluations(ctx, "http://"+addr+"/metrics")
			}
		}
		return s
	case Kro, KroDefaults:
		var extra []string
		if name == Kro {
			extra = []string{"--dynamic-controller-concurrent-reconciles", workers}
		}
		return controllerSpec{name: name, bin: h.bins[filepath.Join(h.cfg.Root, "bin", "kro")], crds: h.kroCRDs,
			args: func(kubeconfig, _ string) []string {
				return kroArgs(kubeconfig, append(extra, h.cfg.KroArgs...)...)
			},
			prepare: func(ctx context.Context, e *env, alive func() error) error { return prepareKro(ctx, e, h.log, alive) },
			edit:    func(ctx context.Context, e *env, _ string) error { return editKroImage(ctx, e) }}
	}
	pprof := h.pprofAddress(name)
	return controllerSpec{name: name, bin: h.bins[bin], crds: h.crds, pprof: pprof, args: func(kubeconfig, _ string) []string {
		return []string{"--kubeconfig", kubeconfig, "--max-concurrent-reconciles", workers,
			"--pprof-bind-address", cmp.Or(pprof, "0")}
	}}
}

// pprofAddress returns a free loopback address for a controller's
// profiler, or "" (no profile) when there is none.
func (h *Harness) pprofAddress(name string) string {
	addr, err := freeAddress()
	if err != nil {
		h.log.printf("  no free port for the profiler of %s (%v): no heap profile", name, err)
		return ""
	}
	return addr
}

// engineSpec runs the engine, serving its metrics on metricsAddr ("0" for
// none) over plain HTTP, a loopback address the harness scrapes without a
// token, and its profiler on pprofAddr ("" for none).
func (h *Harness) engineSpec(metricsAddr, pprofAddr string) controllerSpec {
	return controllerSpec{name: Engine, bin: h.bins[h.cfg.EngineBin], crds: h.crds, templates: true, pprof: pprofAddr, env: h.cfg.EngineEnv,
		args: func(kubeconfig, templates string) []string {
			return append([]string{"run", "--templates", templates, "--kubeconfig", kubeconfig,
				"--metrics-bind-address", metricsAddr, "--metrics-secure=false", "--health-probe-bind-address", "0",
				"--pprof-bind-address", cmp.Or(pprofAddr, "0"),
				"--max-concurrent-reconciles", strconv.Itoa(h.cfg.Workers)}, h.cfg.EngineArgs...)
		},
		edit: func(_ context.Context, _ *env, templates string) error {
			return replaceInTemplates(templates, imageBefore, imageAfter)
		}}
}

// logger writes timestamped progress lines.
type logger struct {
	mu sync.Mutex
	w  io.Writer
}

// printf writes one progress line.
func (l *logger) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "bench %s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// since returns the time since start, rounded for progress lines.
func since(start time.Time) time.Duration { return round(time.Since(start)) }

// round rounds a duration for display.
func round(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }

// loadAverage returns the 1, 5 and 15 minute load averages, for the report.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil || len(b) == 0 {
		return "unknown"
	}
	var one, five, fifteen string
	fmt.Sscan(string(b), &one, &five, &fifteen)
	return one + " " + five + " " + fifteen
}
