// Command bench runs the engine-versus-reference benchmark of package
// bench/harness and prints the report as Markdown on stdout; progress goes
// to stderr. Run it from the repository root after `make assets build`:
//
//	go run ./bench/cmd/bench -n 1000 -rounds 3 -workers 4
//
// With -shards it runs the sharding benchmark instead: the engine without
// sharding, then under --sharding over each count of replicas:
//
//	go run ./bench/cmd/bench -n 5000 -rounds 1 -shards 1,3
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/resource"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cuengine/engine/bench/harness"
)

func main() {
	os.Exit(run())
}

// run parses the flags, runs the benchmark and prints the report, also
// the partial one of a failed run.
func run() int {
	cfg := harness.Config{}
	var controllers, peers, shards, clusters, logDir string
	flag.IntVar(&cfg.N, "n", 1000, "number of MyKind parents")
	flag.IntVar(&cfg.Rounds, "rounds", 3, "rounds; each runs every controller once, alternating which goes first")
	flag.IntVar(&cfg.Workers, "workers", 4, "reconcile workers of each controller (--max-concurrent-reconciles)")
	flag.IntVar(&cfg.Clients, "clients", 16, "concurrent harness requests")
	flag.StringVar(&controllers, "controllers", "engine,reference", "controllers to run, comma-separated (engine, reference, kro, kro-defaults)")
	flag.StringVar(&shards, "shards", "", "replica counts, comma-separated (e.g. 1,3): run the sharding benchmark instead of the controllers: the engine without sharding, then with --sharding over each count, phases (a)-(d)")
	flag.StringVar(&peers, "peers", "", "peers to add to the controllers, comma-separated: kro adds kro (with -workers) and kro-defaults (its defaults); needs `hack/build-assets.sh kro`")
	flag.StringVar(&clusters, "clusters", "", "counts of workload clusters, comma-separated (e.g. 0,1,5): run the benchmark of children in other clusters instead: N parents, each with one ConfigMap in a workload cluster, spread over them (0: the ConfigMap beside its parent, the baseline)")
	flag.BoolVar(&cfg.Scale, "scale", false, "run the scale benchmark instead: N MyKinds with replicas 0, engine and reference with their default flags, time until all Ready, memory, CPU and a restart (make bench-scale)")
	flag.BoolVar(&cfg.Raw, "raw", true, "also time the harness creating the Deployments itself, per round")
	flag.DurationVar(&cfg.PhaseTimeout, "phase-timeout", 10*time.Minute, "bound on each phase")
	flag.DurationVar(&cfg.ReloadTimeout, "reload-timeout", 30*time.Second, "phase (e) is n/a when no Deployment changes within this")
	flag.StringVar(&cfg.EngineBin, "engine-bin", "", "engine binary (default bin/engine; another build gives a before and after)")
	flag.StringVar(&cfg.UpgradeFrom, "upgrade-from", "", "with -scale: an earlier engine binary the engine runs as first (with its CRDs); the restart is then the upgrade to -engine-bin, its CRDs updated first")
	flag.StringVar(&cfg.Templates, "templates", "", "engine templates directory (default examples/templates)")
	flag.Func("engine-env", "KEY=VALUE added to the engine's environment, repeatable (e.g. -engine-env=GOMEMLIMIT=921MiB, what the chart sets under a 1Gi memory limit)", func(v string) error {
		if !strings.Contains(v, "=") {
			return fmt.Errorf("want KEY=VALUE, got %q", v)
		}
		cfg.EngineEnv = append(cfg.EngineEnv, v)
		return nil
	})
	flag.Func("engine-arg", "extra flag for the engine, repeatable (e.g. -engine-arg=--requeue-qps=500)", func(v string) error {
		cfg.EngineArgs = append(cfg.EngineArgs, v)
		return nil
	})
	flag.Func("kro-arg", "extra flag for kro, repeatable (e.g. -kro-arg=--client-qps=1000)", func(v string) error {
		cfg.KroArgs = append(cfg.KroArgs, v)
		return nil
	})
	flag.Func("memory-limit", `run each controller in a memory cgroup of its own with this limit, as a container's (a quantity, e.g. 1Gi; needs root): the engine sets its Go memory limit from it, as in a pod`, func(v string) error {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return err
		}
		cfg.MemoryLimit = q.Value()
		return nil
	})
	flag.StringVar(&logDir, "logs", "", "directory for controller logs (default a new temporary directory, kept)")
	flag.Parse()
	cfg.Controllers = strings.Split(controllers, ",")
	if shards != "" {
		var err error
		if cfg.Shards, err = harness.ParseShards(shards); err != nil {
			fmt.Fprintln(os.Stderr, "bench: -shards:", err)
			return 2
		}
	}
	for _, p := range strings.FieldsFunc(peers, func(r rune) bool { return r == ',' || r == ' ' }) {
		added, ok := harness.Peers[p]
		if !ok {
			fmt.Fprintf(os.Stderr, "bench: unknown peer %q (want kro)\n", p)
			return 2
		}
		cfg.Controllers = append(cfg.Controllers, added...)
	}
	// envtest, which starts the control plane, logs through
	// controller-runtime; its failures are returned as errors.
	ctrllog.SetLogger(logr.Discard())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if cfg.Root, err = repoRoot(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	if cfg.LogDir, err = makeLogDir(logDir); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	if clusters != "" {
		return runClusters(ctx, cfg, clusters)
	}
	rep, err := harness.Run(ctx, cfg)
	if rep != nil {
		rep.Write(os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	return 0
}

// runClusters runs the benchmark of children in other clusters.
func runClusters(ctx context.Context, cfg harness.Config, counts string) int {
	var ks []int
	for _, f := range strings.Split(counts, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k < 0 {
			fmt.Fprintf(os.Stderr, "bench: -clusters %q: %q is not a count of clusters\n", counts, f)
			return 2
		}
		ks = append(ks, k)
	}
	fmt.Fprintln(os.Stderr, "bench: logs and templates in", cfg.LogDir)
	rep, err := harness.RunClusters(ctx, harness.ClustersConfig{
		Root: cfg.Root, EngineBin: cfg.EngineBin, LogDir: cfg.LogDir, N: cfg.N, Clusters: ks,
		Workers: cfg.Workers, Clients: cfg.Clients, Timeout: cfg.PhaseTimeout, EngineArgs: cfg.EngineArgs,
	}, os.Stderr)
	if rep != nil {
		rep.Write(os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	return 0
}

// makeLogDir creates the log directory, a temporary one if dir is empty.
func makeLogDir(dir string) (string, error) {
	if dir == "" {
		return os.MkdirTemp("", "cuengine-bench-")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	return dir, os.MkdirAll(dir, 0o755)
}

// repoRoot walks up from the working directory to the directory holding
// go.mod and bin/.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory: run from the repository")
		}
		dir = parent
	}
}
