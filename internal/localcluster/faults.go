package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Kill ends one component of a full cluster with SIGKILL, as a crash
// would, and waits until it is gone. name is its binary: "etcd",
// "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok".
// Fault tests use it; Revive starts it again.
func (c *Cluster) Kill(name string) error {
	p, err := c.process(name)
	if err != nil {
		return err
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing %s: %w", name, err)
	}
	<-p.done
	return nil
}

// Revive starts a killed component again with the arguments it had, on the
// same ports and data, and waits until it serves (etcd and kube-apiserver;
// the others once started).
func (c *Cluster) Revive(ctx context.Context, name string) error {
	p, err := c.process(name)
	if err != nil {
		return err
	}
	if p.exited() == nil {
		return fmt.Errorf("%s is running: Kill it first", name)
	}
	np, err := startProcess(p.binDir, c.Dir, name, p.args...)
	if err != nil {
		return err
	}
	for i := range c.procs {
		if c.procs[i] == p {
			c.procs[i] = np
		}
	}
	serving := c.serving[name]
	if serving == nil {
		return nil
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, readyTimeout, true, func(ctx context.Context) (bool, error) {
		if err := np.exited(); err != nil {
			return false, err
		}
		ok, _ := serving(ctx)
		return ok, nil
	})
	if err != nil {
		return np.failure(fmt.Errorf("%s did not serve again: %w", name, err))
	}
	return nil
}

func (c *Cluster) process(name string) (*process, error) {
	for _, p := range c.procs {
		if p.name == name {
			return p, nil
		}
	}
	return nil, fmt.Errorf("no %s in this cluster (Kill and Revive need a full cluster)", name)
}

func (c *Cluster) setServing(name string, check func(context.Context) (bool, error)) {
	if c.serving == nil {
		c.serving = map[string]func(context.Context) (bool, error){}
	}
	c.serving[name] = check
}
