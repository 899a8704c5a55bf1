package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/cuengine/engine/internal/localcluster"
)

// Namespaces of the workload and of the warm-up parent.
const (
	benchNamespace  = "bench"
	warmupNamespace = "bench-warmup"
)

// harnessQPS is the harness's client rate limit: high enough never to be
// what is measured.
const harnessQPS = 10000

// env is one fresh control plane and the harness's clients of it.
type env struct {
	cluster *localcluster.Cluster
	cs      kubernetes.Interface
	dyn     dynamic.Interface
	own     *requestCounter // the harness's own requests
	// controlPlane are the pids of etcd and the kube-apiserver; none when
	// they could not be found (their CPU time is then not reported).
	controlPlane []int
}

// loadCRDs runs `engine crds` on the templates and decodes the CRDs it
// prints.
func loadCRDs(ctx context.Context, engineBin, templates string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, engineBin, "crds", "--templates", templates)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s crds: %w\n%s", engineBin, err, stderr.String())
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, doc := range strings.Split(stdout.String(), "\n---\n") {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal([]byte(doc), crd); err != nil {
			return nil, fmt.Errorf("decoding the output of engine crds: %w", err)
		}
		if crd.Name != "" {
			crds = append(crds, crd)
		}
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("engine crds printed no CRD for %s", templates)
	}
	return crds, nil
}

// startEnv starts a bare control plane with crds installed, the workload's
// namespaces and the sharded engine's.
func (h *Harness) startEnv(ctx context.Context, crds []*apiextensionsv1.CustomResourceDefinition) (*env, error) {
	cluster, err := localcluster.Start(ctx, localcluster.Options{CRDs: crds, Progress: h.log.w})
	if err != nil {
		return nil, fmt.Errorf("starting the control plane: %w", err)
	}
	e := &env{cluster: cluster, own: &requestCounter{}}
	if err := e.connect(ctx); err != nil {
		return nil, errors.Join(err, cluster.Stop())
	}
	if e.controlPlane, err = controlPlanePIDs(cluster.Dir); err != nil {
		h.log.printf("  warning: the control plane's CPU time is not measured: %v", err)
	}
	return e, nil
}

// connect builds the harness's clients and creates the namespaces.
func (e *env) connect(ctx context.Context) error {
	cfg := rest.CopyConfig(e.cluster.Config)
	cfg.QPS, cfg.Burst = harnessQPS, harnessQPS
	cfg.Wrap(e.own.wrap)
	var err error
	if e.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if e.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return err
	}
	for _, ns := range []string{benchNamespace, warmupNamespace, shardNamespace} {
		obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
		if _, err := e.cs.CoreV1().Namespaces().Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}
	return nil
}

// scrape reads the apiserver's request counters and the harness's own.
func (e *env) scrape(ctx context.Context) (api, own counts, err error) {
	own = e.own.snapshot()
	api, err = scrapeAPIServer(ctx, e.cs.CoreV1().RESTClient())
	return api, own, err
}

// controlPlaneCPU returns etcd's and the kube-apiserver's CPU time so far,
// and false when their processes are not known.
func (e *env) controlPlaneCPU() (time.Duration, bool, error) {
	if len(e.controlPlane) == 0 {
		return 0, false, nil
	}
	cpu, err := cpuOf(e.controlPlane)
	return cpu, err == nil, err
}

// updateCRDs replaces the cluster's CRDs with crds, as an upgrade applies
// the new engine's, and waits until each is Established again. Its
// requests are the harness's own.
func (e *env) updateCRDs(ctx context.Context, crds []*apiextensionsv1.CustomResourceDefinition) error {
	cfg := rest.CopyConfig(e.cluster.Config)
	cfg.QPS, cfg.Burst = harnessQPS, harnessQPS
	cfg.Wrap(e.own.wrap)
	cs, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	api := cs.ApiextensionsV1().CustomResourceDefinitions()
	for _, crd := range crds {
		live, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading CRD %s: %w", crd.Name, err)
		}
		next := crd.DeepCopy()
		next.ResourceVersion = live.ResourceVersion
		if _, err := api.Update(ctx, next, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("updating CRD %s: %w", crd.Name, err)
		}
	}
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return wait.PollUntilContextCancel(waitCtx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, crd := range crds {
			live, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			established := false
			for _, c := range live.Status.Conditions {
				established = established || (c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue)
			}
			if !established {
				return false, nil
			}
		}
		return true, nil
	})
}

// stop stops the control plane.
func (e *env) stop() error { return e.cluster.Stop() }
