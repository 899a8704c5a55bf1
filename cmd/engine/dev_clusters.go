package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/internal/localcluster"
	"github.com/cuengine/engine/templates"
)

// devWorkload is a workload cluster `engine dev --workload-cluster`
// started and registered.
type devWorkload struct {
	name    string
	cluster *localcluster.Cluster
	secret  string // namespace/name of its cluster Secret
}

// checkWorkloadClusters refuses names the registry would refuse, and
// warns of a cluster no template's policy.clusters allows: the engine
// would never put a child there.
func (o *devOptions) checkWorkloadClusters(set *templates.Set, stderr io.Writer) error {
	if len(o.workloadClusters) == 0 {
		return nil
	}
	if o.clustersNamespaceName() == "-" {
		return &exitError{code: 2, msg: "--workload-cluster registers a cluster in --clusters-namespace, which is \"-\" (workload clusters off)"}
	}
	seen := map[string]bool{}
	for _, name := range o.workloadClusters {
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			return &exitError{code: 2, msg: fmt.Sprintf("--workload-cluster %q: %s", name, strings.Join(errs, "; "))}
		}
		if seen[name] {
			return &exitError{code: 2, msg: fmt.Sprintf("--workload-cluster %q is given twice", name)}
		}
		seen[name] = true
		allowed := false
		for _, t := range set.Templates() {
			if t.Policy.Clusters.Allows(name) {
				allowed = true
				break
			}
		}
		if !allowed {
			fmt.Fprintf(stderr, "dev: warning: no template in %s lists cluster %q in policy.clusters: nothing will be put there (examples/multicluster/templates does)\n", set.Root, name)
		}
	}
	return nil
}

// startWorkloadClusters starts each workload cluster, one after the other,
// as a full local control plane of its own in dir/clusters/NAME, and
// registers it in the management cluster by the Secret the engine reads
// (docs/operations.md, Workload clusters). stop stops every cluster
// started, also after an error.
func (o *devOptions) startWorkloadClusters(ctx context.Context, dir string, mgmt *localcluster.Cluster, stderr io.Writer) (started []*devWorkload, stop func(), err error) {
	stop = func() {
		for i := len(started) - 1; i >= 0; i-- {
			w := started[i]
			fmt.Fprintf(stderr, "dev: stopping workload cluster %s\n", w.name)
			if err := w.cluster.Stop(); err != nil {
				fmt.Fprintln(stderr, "dev:", err)
			}
		}
	}
	if len(o.workloadClusters) == 0 {
		return nil, stop, nil
	}
	kube, err := corev1client.NewForConfig(mgmt.Config)
	if err != nil {
		return nil, stop, err
	}
	ns := o.clustersNamespaceName()
	if err := ensureNamespace(ctx, kube, ns); err != nil {
		return nil, stop, err
	}
	for _, name := range o.workloadClusters {
		wdir := filepath.Join(dir, "clusters", name)
		fmt.Fprintf(stderr, "dev: starting workload cluster %s in %s (about 10 seconds)\n", name, wdir)
		c, err := localcluster.Start(ctx, localcluster.Options{Full: true, Dir: wdir, Progress: stderr})
		if err != nil {
			return started, stop, fmt.Errorf("starting workload cluster %s: %w", name, err)
		}
		w := &devWorkload{name: name, cluster: c, secret: ns + "/" + name}
		started = append(started, w)
		if err := registerCluster(ctx, kube, ns, name, c.Kubeconfig); err != nil {
			return started, stop, fmt.Errorf("registering workload cluster %s: %w", name, err)
		}
		fmt.Fprintf(stderr, "dev: workload cluster %s registered by Secret %s\n", name, w.secret)
	}
	return started, stop, nil
}

// ensureNamespace creates namespace ns unless it exists.
func ensureNamespace(ctx context.Context, kube corev1client.CoreV1Interface, ns string) error {
	_, err := kube.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s for the cluster Secrets: %w", ns, err)
	}
	return nil
}

// registerCluster writes the cluster Secret of cluster name: labelled with
// its name, its kubeconfig (token and CA inline) under the key kubeconfig.
func registerCluster(ctx context.Context, kube corev1client.CoreV1Interface, ns, name, kubeconfig string) error {
	data, err := os.ReadFile(kubeconfig)
	if err != nil {
		return err
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{contract.LabelCluster: name}},
		Data:       map[string][]byte{contract.KeyKubeconfig: data},
	}
	_, err = kube.Secrets(ns).Create(ctx, sec, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return errors.New("Secret " + ns + "/" + name + " already exists in the management cluster")
	}
	return err
}

// workloadBanner is what the ready message says of the workload clusters.
func workloadBanner(ws []*devWorkload) string {
	var b strings.Builder
	for _, w := range ws {
		fmt.Fprintf(&b, `Workload cluster %s, registered by Secret %s. In another shell:

    export KUBECONFIG=%s
    kubectl get namespaces,deployments -A -l %s=%s

`, w.name, w.secret, w.cluster.Kubeconfig, contract.LabelManagedBy, contract.ManagedByValue)
	}
	return b.String()
}
