package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/cuengine/engine/internal/localcluster"
	"github.com/cuengine/engine/templates"
)

type devOptions struct {
	runOptions
	dir         string
	gcsEmulator bool
	postgres    bool
	// workloadClusters are the names of the workload clusters to start
	// and register (--workload-cluster).
	workloadClusters []string
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
kubectl from another shell with the printed export line. Ctrl-C stops it all.

--workload-cluster NAME starts another full local control plane as the
workload cluster NAME and registers it by a cluster Secret in
--clusters-namespace, for templates that put children in other clusters
(examples/multicluster/templates names west and east).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.setLogger(cmd, true); err != nil {
				return err
			}
			return o.runDev(cmd)
		},
	}
	o.addFlags(cmd)
	cmd.Flags().StringVar(&o.dir, "dir", ".engine-dev", "working directory of the local cluster (data, logs, kubeconfig)")
	cmd.Flags().BoolVar(&o.gcsEmulator, "gcs-emulator", true, "serve the gcs provider from a local Cloud Storage emulator, engine-gcs-emulator beside the engine (ignored when STORAGE_EMULATOR_HOST is set)")
	cmd.Flags().StringSliceVar(&o.workloadClusters, "workload-cluster", nil, "start a local control plane as the workload cluster NAME (in DIR/clusters/NAME) and register it by a cluster Secret in --clusters-namespace (repeatable, or comma-separated)")
	cmd.Flags().BoolVar(&o.postgres, "postgres", true, "serve the postgresql provider from a throwaway PostgreSQL server when its binaries are installed (ignored when PGHOST is set)")
	_ = cmd.Flags().Set("metrics-bind-address", "0")
	// Plain HTTP on loopback when given an address: a local cluster's
	// metrics are for the person running it.
	_ = cmd.Flags().Set("metrics-secure", "false")
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
		if t.Converts() {
			// Its conversion webhook is the engine's, on this machine:
			// the engine installs it once its server has a certificate.
			continue
		}
		crds = append(crds, t.CRD())
	}
	if err := o.checkWorkloadClusters(set, stderr); err != nil {
		return err
	}
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return err
	}
	if err := resetDevDir(dir); err != nil {
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
	workloads, stopWorkloads, err := o.startWorkloadClusters(ctx, dir, cluster, stderr)
	defer stopWorkloads()
	if err != nil {
		return err
	}
	gcsNote := "Buckets go to the project of your Application Default Credentials."
	if host := os.Getenv("STORAGE_EMULATOR_HOST"); host != "" {
		gcsNote = "Buckets go to the Cloud Storage emulator at " + host + "."
	} else if o.gcsEmulator {
		emu, err := startGCSEmulator()
		if err != nil {
			return fmt.Errorf("starting the Cloud Storage emulator: %w", err)
		}
		defer emu.stop()
		// The Go storage client's own convention, read by the gcs plugin,
		// which inherits the engine's environment when it starts.
		os.Setenv("STORAGE_EMULATOR_HOST", emu.host)
		gcsNote = "Buckets go to a local Cloud Storage emulator at http://" + emu.host + " (no Google account needed)."
	}
	pgNote, stopPG := o.startPostgres(ctx, stderr)
	defer stopPG()
	fmt.Fprintf(cmd.OutOrStdout(), `
The cluster is ready. In another shell:

    export KUBECONFIG=%s
    export PATH=%s:$PATH    # kubectl v1.37, matching the cluster
    %s

%sTemplates in %s are watched: edit them and the cluster follows.
%s
%s
Ctrl-C stops the engine and the clusters.

`, cluster.Kubeconfig, binDir(), o.tryLines(), workloadBanner(workloads), set.Root, gcsNote, pgNote)
	o.installCRDs = true
	o.webhook.dev(dir)
	return o.run(cmd, cluster.Config)
}

// tryLines are the banner's commands to try in the main cluster.
func (o *devOptions) tryLines() string {
	if len(o.workloadClusters) > 0 {
		return `kubectl apply -f examples/multicluster/tenant.yaml    # a Tenant in the workload cluster west
    kubectl get tenants,configmaps -A`
	}
	return `kubectl apply -f examples/crs/
    kubectl get mykinds,gcs,storefronts,webapps,teamapps,deployments`
}

// binDir is where kubectl was built (bin/ of the repository).
func binDir() string {
	if dir, err := localcluster.AssetsDir(); err == nil {
		return dir
	}
	return "bin"
}

// devMarker marks a directory as engine dev's own, so that only such a
// directory is ever wiped.
const devMarker = ".engine-dev-dir"

// resetDevDir empties the working directory: each run starts from a clean
// cluster, since the data of a previous run belongs to processes that are
// gone. It refuses to wipe a non-empty directory it did not create.
func resetDevDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case os.IsNotExist(err):
	case err != nil:
		return err
	case len(entries) > 0:
		if _, err := os.Stat(filepath.Join(dir, devMarker)); err != nil {
			return fmt.Errorf("%s is not empty and was not created by engine dev; choose another --dir", dir)
		}
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, devMarker), nil, 0o644)
}
