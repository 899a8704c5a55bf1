package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/cuengine/engine/internal/localcluster"
	"github.com/cuengine/engine/templates"
)

type devOptions struct {
	runOptions
	dir string
}

func newDevCommand() *cobra.Command {
	o := &devOptions{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Start a local cluster, install the templates' CRDs and run the engine against it",
		Long: `Dev is the one-command way to try the engine: it starts a real local
Kubernetes control plane from the binaries in bin/ (make assets builds them):
etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok with one
fake node, so pods become Ready. It installs the CRDs generated from the
templates, writes a kubeconfig, and runs the engine with hot reload. Use
kubectl from another shell with the printed export line. Ctrl-C stops it all.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
			return o.runDev(cmd)
		},
	}
	o.addFlags(cmd)
	cmd.Flags().StringVar(&o.dir, "dir", ".engine-dev", "working directory of the local cluster (data, logs, kubeconfig)")
	_ = cmd.Flags().Set("metrics-bind-address", "0")
	_ = cmd.Flags().Set("health-probe-bind-address", "0")
	return cmd
}

func (o *devOptions) runDev(cmd *cobra.Command) error {
	ctx := cmd.Context()
	stderr := cmd.ErrOrStderr()
	set, err := templates.Load(o.templates)
	if err != nil {
		return &exitError{code: 1, msg: "templates: " + err.Error()}
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, t := range set.Templates() {
		crds = append(crds, t.CRD())
	}
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return err
	}
	// Each run starts from a clean cluster: the data of a previous run
	// belongs to processes that are gone.
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "dev: starting a local cluster in %s (about 10 seconds)\n", dir)
	cluster, err := localcluster.Start(ctx, localcluster.Options{Full: true, Dir: dir, Progress: stderr, CRDs: crds})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(stderr, "dev: stopping the local cluster")
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(stderr, "dev:", err)
		}
	}()
	fmt.Fprintf(cmd.OutOrStdout(), `
The cluster is ready. In another shell:

    export KUBECONFIG=%s
    kubectl apply -f examples/crs/
    kubectl get mykinds,deployments

Templates in %s are watched: edit them and the cluster follows.
Ctrl-C stops the engine and the cluster.

`, cluster.Kubeconfig, set.Root)
	o.installCRDs = true
	return o.run(cmd, cluster.Config)
}
