package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// componentStartTimeout bounds the start of each envtest component.
const componentStartTimeout = time.Minute

// startBare starts etcd and kube-apiserver through envtest and writes an
// admin kubeconfig.
func (c *Cluster) startBare(ctx context.Context, assets string, prog *progress) error {
	env, err := c.newEnv(assets)
	if err != nil {
		return err
	}
	c.env = env
	started := time.Now()
	prog.printf("starting etcd and kube-apiserver (envtest)...")
	stopBeat := prog.heartbeat("starting etcd and kube-apiserver")
	cfg, err := env.Start()
	stopBeat()
	if err != nil {
		return c.bareFailure(fmt.Errorf("starting envtest control plane: %w", err))
	}
	prog.printf("kube-apiserver ready (%s)", since(started))
	c.Config = cfg
	if env.ControlPlane.Etcd != nil && env.ControlPlane.Etcd.URL != nil {
		c.EtcdURL = env.ControlPlane.Etcd.URL.String()
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("starting envtest control plane: %w", err)
	}
	return c.writeBareKubeconfig(env)
}

// newEnv configures an envtest environment whose data, certificates and logs
// live in c.Dir, its apiserver advertising only the loopback address.
func (c *Cluster) newEnv(assets string) (*envtest.Environment, error) {
	// envtest reuses certificates it finds but then does not know their CA,
	// so a reused Dir starts with fresh ones.
	certDir := filepath.Join(c.Dir, "apiserver")
	if err := os.RemoveAll(certDir); err != nil {
		return nil, fmt.Errorf("clearing apiserver certificate directory: %w", err)
	}
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating apiserver certificate directory: %w", err)
	}
	etcdLog, err := openLog(c.Dir, "etcd")
	if err != nil {
		return nil, err
	}
	c.logFiles = append(c.logFiles, etcdLog)
	apiLog, err := openLog(c.Dir, "kube-apiserver")
	if err != nil {
		return nil, err
	}
	c.logFiles = append(c.logFiles, apiLog)
	apiserver := &envtest.APIServer{
		Path:    filepath.Join(assets, "kube-apiserver"),
		CertDir: certDir,
		Out:     apiLog,
		Err:     apiLog,
	}
	// Without these the apiserver advertises the host's network address in
	// the kubernetes Service; the endpoint reconcilers refuse loopback.
	apiserver.Configure().
		Set("advertise-address", loopback).
		Set("endpoint-reconciler-type", "none")
	return &envtest.Environment{
		BinaryAssetsDirectory: assets,
		ControlPlane: envtest.ControlPlane{
			Etcd: &envtest.Etcd{
				Path:    filepath.Join(assets, "etcd"),
				DataDir: filepath.Join(c.Dir, "etcd"),
				Out:     etcdLog,
				Err:     etcdLog,
			},
			APIServer:   apiserver,
			KubectlPath: filepath.Join(assets, "kubectl"),
		},
		ControlPlaneStartTimeout: componentStartTimeout,
		ControlPlaneStopTimeout:  stopGrace,
	}, nil
}

// writeBareKubeconfig writes an admin kubeconfig for the envtest apiserver.
func (c *Cluster) writeBareKubeconfig(env *envtest.Environment) error {
	user, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("adding admin user: %w", err)
	}
	data, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("building admin kubeconfig: %w", err)
	}
	path := filepath.Join(c.Dir, "kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	c.Kubeconfig = path
	return nil
}

// bareFailure adds the tails of the etcd and kube-apiserver logs to err.
func (c *Cluster) bareFailure(err error) error {
	errs := []error{err}
	for _, name := range []string{"etcd", "kube-apiserver"} {
		path := logPath(c.Dir, name)
		errs = append(errs, fmt.Errorf("--- last lines of %s ---\n%s", path, logTail(path)))
	}
	return errors.Join(errs...)
}
