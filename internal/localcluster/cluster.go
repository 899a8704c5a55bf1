package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Options configures Start.
type Options struct {
	// Full selects the control plane. False starts a bare kube-apiserver and
	// etcd through controller-runtime's envtest: fast, for integration tests
	// that only need the API. True also starts kube-controller-manager,
	// kube-scheduler and kwok with one fake Ready node, kwok-node-0, so
	// Deployments get ReplicaSets and pods that become Ready, and
	// owner-reference garbage collection works.
	Full bool
	// Dir is the working directory for data, certificates, logs and the
	// kubeconfig. Empty means a new temporary directory, which Stop removes;
	// a given directory is kept.
	Dir string
	// Progress receives human-readable progress lines during Start, such as
	// "kube-apiserver ready (2.1s)"; nil means silent.
	Progress io.Writer
	// CRDs are installed, and waited for until Established, before Start
	// returns.
	CRDs []*apiextensionsv1.CustomResourceDefinition
}

// Cluster is a running local control plane. Stop it when done.
type Cluster struct {
	// Config authenticates as a cluster administrator (system:masters).
	Config *rest.Config
	// Kubeconfig is the path of an admin kubeconfig file, usable by kubectl
	// and by other processes.
	Kubeconfig string
	// Dir is the working directory holding data, certificates, the
	// kubeconfig and one <component>.log file per process.
	Dir string
	// EtcdURL is etcd's client URL (plain HTTP on the loopback), for tests
	// that read what the apiserver stored.
	EtcdURL string

	removeDir bool                 // Dir was created by Start
	env       *envtest.Environment // bare mode
	logFiles  []*os.File           // bare mode: envtest's process output
	procs     []*process           // full mode, in start order
	// serving, in full mode, tells whether etcd and kube-apiserver serve
	// (Revive waits for it).
	serving map[string]func(context.Context) (bool, error)

	stopOnce sync.Once
	stopErr  error
}

// Start starts a local control plane as opts describe and returns once it is
// ready: the apiserver serves, the CRDs are Established and, in full mode,
// the node is Ready and the default ServiceAccount exists. On failure
// everything started so far is stopped, and the error quotes the log of the
// failing component.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	started := time.Now()
	prog := &progress{w: opts.Progress}
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	c, err := newCluster(opts.Dir)
	if err != nil {
		return nil, err
	}
	if err := c.start(ctx, opts, assets, prog); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	prog.printf("cluster ready in %s (kubeconfig %s)", since(started), c.Kubeconfig)
	return c, nil
}

// newCluster prepares the working directory.
func newCluster(dir string) (*Cluster, error) {
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("creating working directory: %w", err)
		}
		return &Cluster{Dir: dir}, nil
	}
	dir, err := os.MkdirTemp("", "localcluster-")
	if err != nil {
		return nil, fmt.Errorf("creating working directory: %w", err)
	}
	return &Cluster{Dir: dir, removeDir: true}, nil
}

// start brings up the control plane of the chosen mode and installs the CRDs.
func (c *Cluster) start(ctx context.Context, opts Options, assets string, prog *progress) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("starting cluster: %w", err)
	}
	var err error
	if opts.Full {
		err = c.startFull(ctx, assets, prog)
	} else {
		err = c.startBare(ctx, assets, prog)
	}
	if err != nil {
		return err
	}
	return c.installCRDs(ctx, opts.CRDs, prog)
}

// Stop stops every process the cluster started, killing those that ignore
// SIGTERM for a few seconds, and removes the working directory if Start
// created it. It is safe to call more than once.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		c.stopErr = c.stop()
	})
	return c.stopErr
}

// stop does the work of Stop.
func (c *Cluster) stop() error {
	var errs []error
	if c.env != nil {
		if err := c.env.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping envtest control plane: %w", err))
		}
	}
	for _, f := range c.logFiles {
		f.Close()
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		if err := c.procs[i].stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.removeDir {
		if err := os.RemoveAll(c.Dir); err != nil {
			errs = append(errs, fmt.Errorf("removing working directory: %w", err))
		}
	}
	return errors.Join(errs...)
}

// pids returns the process ids of the processes started in full mode.
func (c *Cluster) pids() []int {
	pids := make([]int, 0, len(c.procs))
	for _, p := range c.procs {
		pids = append(pids, p.pid())
	}
	return pids
}

// alive returns an error, quoting its log, once any started process has
// exited.
func (c *Cluster) alive() error {
	for _, p := range c.procs {
		if err := p.exited(); err != nil {
			return err
		}
	}
	return nil
}
