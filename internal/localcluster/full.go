package localcluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
)

const (
	// readyTimeout bounds each start-up wait of a full cluster.
	readyTimeout = 90 * time.Second
)

// ports are the loopback ports of a full cluster.
type ports struct {
	etcdClient, etcdPeer, apiserver, controllerManager, scheduler int
}

// fullStart carries what the steps of a full start share.
type fullStart struct {
	c      *Cluster
	assets string
	prog   *progress
	ports  ports
	creds  *credentials
	client corev1client.CoreV1Interface // with a per-request timeout, for probes
}

// startFull starts etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok by hand, creates the fake node and waits until it
// is Ready and the default ServiceAccount exists.
func (c *Cluster) startFull(ctx context.Context, assets string, prog *progress) error {
	err := requireBinaries(assets, "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
	if err != nil {
		return err
	}
	s, err := c.prepareFull(assets, prog)
	if err != nil {
		return err
	}
	steps := []func(context.Context) error{
		s.startEtcd, s.startAPIServer, s.startComponents, s.createNode, s.waitNodeReady, s.waitDefaultServiceAccount,
	}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

// prepareFull picks ports, writes credentials and the kubeconfig, and builds
// the admin config.
func (c *Cluster) prepareFull(assets string, prog *progress) (*fullStart, error) {
	p, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	creds, err := writeCredentials(filepath.Join(c.Dir, "pki"))
	if err != nil {
		return nil, err
	}
	c.Config = creds.restConfig("https://" + hostPort(p[2]))
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	if err := writeKubeconfig(c.Config, c.Kubeconfig); err != nil {
		return nil, err
	}
	probeCfg := rest.CopyConfig(c.Config)
	probeCfg.Timeout = checkTimeout
	client, err := corev1client.NewForConfig(probeCfg)
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return &fullStart{
		c: c, assets: assets, prog: prog, creds: creds, client: client,
		ports: ports{etcdClient: p[0], etcdPeer: p[1], apiserver: p[2], controllerManager: p[3], scheduler: p[4]},
	}, nil
}

// start starts one binary and records it for Stop.
func (s *fullStart) start(name string, args ...string) (*process, error) {
	s.prog.printf("starting %s...", name)
	p, err := startProcess(s.assets, s.c.Dir, name, args...)
	if err != nil {
		return nil, err
	}
	s.c.procs = append(s.c.procs, p)
	return p, nil
}

// startEtcd starts etcd and waits until it reports healthy.
func (s *fullStart) startEtcd(ctx context.Context) error {
	client := "http://" + hostPort(s.ports.etcdClient)
	s.c.EtcdURL = client
	peer := "http://" + hostPort(s.ports.etcdPeer)
	p, err := s.start("etcd",
		"--name=localcluster",
		"--data-dir="+filepath.Join(s.c.Dir, "etcd"),
		"--listen-client-urls="+client,
		"--advertise-client-urls="+client,
		"--listen-peer-urls="+peer,
		"--initial-advertise-peer-urls="+peer,
		"--initial-cluster=localcluster="+peer,
		"--unsafe-no-fsync=true",
	)
	if err != nil {
		return err
	}
	healthy := func(ctx context.Context) (bool, error) { return httpOK(ctx, client+"/health") }
	s.c.setServing("etcd", healthy)
	return s.prog.wait(ctx, waitSpec{
		what: "for etcd to be healthy", done: "etcd ready", timeout: readyTimeout,
		check: healthy, blame: p, alive: s.c.alive,
	})
}

// startAPIServer starts kube-apiserver and waits until /readyz is ok.
func (s *fullStart) startAPIServer(ctx context.Context) error {
	p, err := s.start("kube-apiserver",
		"--etcd-servers=http://"+hostPort(s.ports.etcdClient),
		"--bind-address="+loopback,
		"--advertise-address="+loopback,
		// The endpoint reconcilers refuse a loopback address for the
		// kubernetes Service; nothing in a local cluster needs its endpoints.
		"--endpoint-reconciler-type=none",
		// A webhook or conversion webhook given as a Service is called at
		// one of the Service's endpoints (an address in its EndpointSlices),
		// not at <service>.<namespace>.svc: there is no cluster DNS here.
		// The endpoints of pods on the fake node are not reachable; a test
		// stands an engine on this machine in for them with an EndpointSlice
		// of its own (e2e TestDeployServesConversion).
		"--enable-aggregator-routing=true",
		"--secure-port="+strconv.Itoa(s.ports.apiserver),
		"--tls-cert-file="+s.creds.certFile,
		"--tls-private-key-file="+s.creds.keyFile,
		"--token-auth-file="+s.creds.tokenFile,
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+s.creds.saKeyFile,
		"--service-account-signing-key-file="+s.creds.saKeyFile,
		"--service-cluster-ip-range="+serviceCIDR,
		"--allow-privileged=true",
		"--profiling=false",
	)
	if err != nil {
		return err
	}
	s.c.setServing("kube-apiserver", s.apiserverReady)
	return s.prog.wait(ctx, waitSpec{
		what: "for kube-apiserver /readyz", done: "kube-apiserver ready", timeout: readyTimeout,
		check: s.apiserverReady, blame: p, alive: s.c.alive,
	})
}

// apiserverReady reports whether /readyz answers ok.
func (s *fullStart) apiserverReady(ctx context.Context) (bool, error) {
	body, err := s.client.RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return false, err
	}
	return string(body) == "ok", nil
}

// startComponents starts kube-controller-manager, kube-scheduler and kwok.
func (s *fullStart) startComponents(context.Context) error {
	stages := filepath.Join(s.c.Dir, "kwok-stages.yaml")
	if err := writeKwokStages(stages); err != nil {
		return err
	}
	kubeconfig := "--kubeconfig=" + s.c.Kubeconfig
	components := []struct {
		name string
		args []string
	}{
		{"kube-controller-manager", []string{
			kubeconfig,
			"--controllers=*,-nodeipam",
			"--leader-elect=false",
			"--service-account-private-key-file=" + s.creds.saKeyFile,
			"--root-ca-file=" + s.creds.caFile,
			"--bind-address=" + loopback,
			"--secure-port=" + strconv.Itoa(s.ports.controllerManager),
			"--profiling=false",
		}},
		{"kube-scheduler", []string{
			kubeconfig,
			"--leader-elect=false",
			"--bind-address=" + loopback,
			"--secure-port=" + strconv.Itoa(s.ports.scheduler),
			"--profiling=false",
		}},
		{"kwok", kwokArgs(s.c.Kubeconfig, stages)},
	}
	for _, comp := range components {
		if _, err := s.start(comp.name, comp.args...); err != nil {
			return err
		}
	}
	return nil
}

// createNode creates the fake node kwok manages.
func (s *fullStart) createNode(ctx context.Context) error {
	_, err := s.client.Nodes().Create(ctx, fakeNode(), metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) { // a reused Dir keeps it
		return fmt.Errorf("creating node %s: %w", nodeName, err)
	}
	return nil
}

// waitNodeReady waits until kwok has made the node Ready and the node
// lifecycle controller has lifted its not-ready taint.
func (s *fullStart) waitNodeReady(ctx context.Context) error {
	return s.prog.wait(ctx, waitSpec{
		what: "for node " + nodeName + " to be Ready", done: "node " + nodeName + " Ready", timeout: readyTimeout,
		check: func(ctx context.Context) (bool, error) {
			node, err := s.client.Nodes().Get(ctx, nodeName, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return nodeReady(node), nil
		},
		blame: s.proc("kwok"), alive: s.c.alive,
	})
}

// waitDefaultServiceAccount waits until kube-controller-manager has created
// the default ServiceAccount in namespace default, which pods need.
func (s *fullStart) waitDefaultServiceAccount(ctx context.Context) error {
	return s.prog.wait(ctx, waitSpec{
		what: "for the default ServiceAccount", done: "default ServiceAccount exists", timeout: readyTimeout,
		check: func(ctx context.Context) (bool, error) {
			_, err := s.client.ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return err == nil, err
		},
		blame: s.proc("kube-controller-manager"), alive: s.c.alive,
	})
}

// proc returns the started process with the given name, or nil.
func (s *fullStart) proc(name string) *process {
	for _, p := range s.c.procs {
		if p.name == name {
			return p
		}
	}
	return nil
}

// httpOK reports whether a GET of url answers 200.
func httpOK(ctx context.Context, url string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, fmt.Errorf("building request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK, nil
}

// freePorts returns n distinct free TCP ports on the loopback address. All
// listeners stay open until every port is chosen, so the ports differ.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", hostPort(0))
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// hostPort joins the loopback address and port.
func hostPort(port int) string {
	return net.JoinHostPort(loopback, strconv.Itoa(port))
}
