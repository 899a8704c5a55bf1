package engine_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/clusters"
	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/internal/localcluster"
	"github.com/cuengine/engine/templates"
)

var placementGVK = schema.GroupVersionKind{Group: "multi.cuengine.dev", Version: "v1", Kind: "Placement"}

var localGVK = schema.GroupVersionKind{Group: "multi.cuengine.dev", Version: "v1", Kind: "Local"}

// localTemplate keeps its one child in the engine's cluster.
const localTemplate = `parent: {apiVersion: "multi.cuengine.dev/v1", kind: "Local", spec: note: string}
children: note: {apiVersion: "v1", kind: "ConfigMap", metadata: name: parent.metadata.name + "-note", data: note: parent.spec.note}
`

// placementTemplate puts a Namespace and a Deployment in the workload
// cluster the spec names, and a ConfigMap beside the parent.
const placementTemplate = `parent: {apiVersion: "multi.cuengine.dev/v1", kind: "Placement", spec: {cluster: string, replicas: *1 | int}}
policy: {clusterScoped: true, crossNamespace: true, clusters: ["west"]}
children: ns: {cluster: parent.spec.cluster, apiVersion: "v1", kind: "Namespace", metadata: name: parent.metadata.name}
children: app: {
	cluster:    parent.spec.cluster
	apiVersion: "apps/v1"
	kind:       "Deployment"
	metadata: {name: "app", namespace: parent.metadata.name}
	spec: {
		replicas: parent.spec.replicas
		selector: matchLabels: app: "app"
		template: {metadata: labels: app: "app", spec: containers: [{name: "app", image: "nginx"}]}
	}
}
children: note: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "note", data: cluster: parent.spec.cluster}
status: cluster: parent.spec.cluster
`

// TestWorkloadClusterChildren runs a second control plane as the
// registered workload cluster "west", reached through a proxy the test
// can cut: a parent's Namespace and Deployment are created there (owned
// through the parent's inventory, no owner reference) and its ConfigMap
// locally; a hand edit of the remote Deployment is reverted by its watch
// event (the resync is 10 minutes); with west cut off the parent is
// ClusterUnreachable and nothing is deleted for a minute, while a parent
// of another kind is created and becomes Ready, and it converges once west
// answers again; with its Secret removed the parent is ClusterUnknown and
// nothing is deleted; a parent deleted while west is cut off keeps its
// finalizer and its children there until west is back, then they go.
func TestWorkloadClusterChildren(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	west, wk := startWorkload(t)
	proxy := startProxy(t, west.Config.Host)

	ns := namespace(t)
	secret := clusterSecret(t, ns, "west", kubeconfigVia(t, west.Kubeconfig, proxy.addr))

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "placement.cue"), []byte(placementTemplate), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "local.cue"), []byte(localTemplate), 0o644))
	set, err := templates.Load(dir)
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	eng, _ := runEngine(t, set, engine.Options{
		InstallCRDs:       true,
		Namespace:         "",
		ResourceResync:    10 * time.Minute,
		Clusters:          clusters.Secrets{Client: cs.CoreV1(), Namespace: ns},
		ClusterProbeEvery: 500 * time.Millisecond,
	})

	const name = "acme"
	p := parent(placementGVK, ns, name, map[string]any{"cluster": "west"})
	eventually(t, "the Placement CRD served", func(ctx context.Context) (bool, error) {
		err := k8s.Create(ctx, p.DeepCopy())
		return err == nil, err
	})
	created := time.Now()
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), p.DeepCopy()) })

	dep := &appsv1.Deployment{}
	eventuallyWithin(t, "the Deployment in west", time.Minute, func(ctx context.Context) (bool, error) {
		return wk.Get(ctx, client.ObjectKey{Namespace: name, Name: "app"}, dep) == nil, nil
	})
	t.Logf("parent created to remote Deployment: %s", time.Since(created).Round(time.Millisecond))
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(placementGVK)
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(p), live))
	assert.Equal(t, string(live.GetUID()), dep.Labels[contract.LabelParentUID])
	assert.Empty(t, dep.OwnerReferences, "no owner reference crosses clusters")
	assert.Equal(t, "west", dep.Annotations[contract.AnnotationCluster])
	assert.Contains(t, live.GetAnnotations()[contract.AnnotationInventory], `"west:Deployment.apps/acme/app"`)
	assert.Contains(t, live.GetAnnotations()[contract.AnnotationInventory], `"west:Namespace//acme"`)
	assert.Contains(t, live.GetFinalizers(), contract.Finalizer)
	remoteNS := &corev1.Namespace{}
	require.NoError(t, wk.Get(ctx, client.ObjectKey{Name: name}, remoteNS))
	note := &corev1.ConfigMap{}
	eventually(t, "the local ConfigMap", func(ctx context.Context) (bool, error) {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "note"}, note) == nil, nil
	})
	assert.Equal(t, "west", note.Data["cluster"])
	err = k8s.Get(ctx, client.ObjectKey{Namespace: name, Name: "app"}, &appsv1.Deployment{})
	assert.True(t, apierrors.IsNotFound(err), "the Deployment is in west only: %v", err)
	waitReason(t, p, contract.ReasonSynced)
	ready, err := condition(ctx, p, contract.ConditionReady)
	require.NoError(t, err)
	assert.Contains(t, ready.Message, "Deployment app in cluster west", "the bare control plane runs no Deployment controller: not ready, and where it is")

	// A parent naming a cluster the policy does not list: refused, per
	// parent, and nothing of it written anywhere.
	other := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns + "-east"}}
	require.NoError(t, k8s.Create(ctx, other))
	refused := parent(placementGVK, other.Name, "elsewhere", map[string]any{"cluster": "east"})
	require.NoError(t, k8s.Create(ctx, refused.DeepCopy()))
	waitReason(t, refused, contract.ReasonChildRefused)
	c, err := condition(ctx, refused, contract.ConditionSynced)
	require.NoError(t, err)
	assert.Contains(t, c.Message, `Namespace "elsewhere" is put in cluster "east", which the template's policy.clusters does not list (west)`)
	err = wk.Get(ctx, client.ObjectKey{Name: "elsewhere"}, &corev1.Namespace{})
	assert.True(t, apierrors.IsNotFound(err), "nothing of a refused parent in west: %v", err)

	// A hand edit in west is reverted by its watch event.
	edited := time.Now()
	require.NoError(t, wk.Patch(ctx, dep, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":5}}`))))
	eventuallyWithin(t, "the edit reverted", 15*time.Second, func(ctx context.Context) (bool, error) {
		err := wk.Get(ctx, client.ObjectKeyFromObject(dep), dep)
		return err == nil && ptr.Deref(dep.Spec.Replicas, 0) == 1, err
	})
	t.Logf("remote edit reverted in %s", time.Since(edited).Round(time.Millisecond))

	// West cut off: ClusterUnreachable, nothing deleted anywhere, the
	// local child goes on (a spec change reaches it).
	proxy.stop()
	cut := time.Now()
	require.NoError(t, k8s.Patch(ctx, p.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":2}}`))))
	waitReason(t, p, contract.ReasonClusterUnreachable)
	t.Logf("west cut off to ClusterUnreachable: %s", time.Since(cut).Round(time.Millisecond))
	c, err = condition(ctx, p, contract.ConditionSynced)
	require.NoError(t, err)
	assert.Contains(t, c.Message, `cluster "west" is unreachable`)
	assert.Contains(t, c.Message, "the parent's 2 children there are left as they are")
	require.NoError(t, wk.Get(ctx, client.ObjectKeyFromObject(dep), dep), "nothing deleted in west")
	assert.Nil(t, dep.DeletionTimestamp)
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(live), live))
	assert.Contains(t, live.GetAnnotations()[contract.AnnotationInventory], `"west:Deployment.apps/acme/app"`, "the inventory keeps what is in west")

	// Other parents go on while west is away: a new one of a kind that
	// stays local becomes Ready with its child.
	bystander := parent(localGVK, ns, "other", map[string]any{"note": "made during the cut"})
	eventually(t, "the Local CRD served", func(ctx context.Context) (bool, error) {
		err := k8s.Create(ctx, bystander.DeepCopy())
		return err == nil, err
	})
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), bystander.DeepCopy()) })
	eventually(t, "the other parent Ready with its ConfigMap, west still cut off", func(ctx context.Context) (bool, error) {
		c, err := condition(ctx, bystander, contract.ConditionReady)
		if err != nil || c == nil || c.Status != metav1.ConditionTrue {
			return false, err
		}
		return true, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "other-note"}, &corev1.ConfigMap{})
	})

	// A minute without west: still said, still nothing deleted.
	require.NoError(t, wait.PollUntilContextTimeout(ctx, time.Second, 70*time.Second, true, func(context.Context) (bool, error) {
		return time.Since(cut) >= time.Minute, nil
	}))
	c, err = condition(ctx, p, contract.ConditionSynced)
	require.NoError(t, err)
	assert.Equal(t, contract.ReasonClusterUnreachable, c.Reason, "a minute after the cut")
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(live), live))
	assert.Nil(t, live.GetDeletionTimestamp())
	assert.Contains(t, live.GetAnnotations()[contract.AnnotationInventory], `"west:Deployment.apps/acme/app"`, "the inventory keeps what is in west after a minute")
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "note"}, &corev1.ConfigMap{}), "the local child is kept")

	proxy.start()
	back := time.Now()
	eventuallyWithin(t, "converged after west is back", time.Minute, func(ctx context.Context) (bool, error) {
		err := wk.Get(ctx, client.ObjectKeyFromObject(dep), dep)
		return err == nil && ptr.Deref(dep.Spec.Replicas, 0) == 2, err
	})
	t.Logf("west back to the change made meanwhile applied there: %s", time.Since(back).Round(time.Millisecond))
	waitReason(t, p, contract.ReasonSynced)

	// The cluster Secret removed: said, nothing deleted.
	require.NoError(t, k8s.Delete(ctx, secret.DeepCopy()))
	waitReason(t, p, contract.ReasonClusterUnknown)
	c, err = condition(ctx, p, contract.ConditionSynced)
	require.NoError(t, err)
	assert.Contains(t, c.Message, `cluster "west" was removed (Secret `+ns+`/west deleted at `)
	require.NoError(t, wk.Get(ctx, client.ObjectKeyFromObject(dep), dep))
	assert.Nil(t, dep.DeletionTimestamp)
	assert.Contains(t, statusOf(eng), "west", "the registry says what became of west")
	require.NoError(t, k8s.Create(ctx, secret.DeepCopy()))
	waitReason(t, p, contract.ReasonSynced)

	// Deleted while west is cut off: the finalizer stays, nothing in
	// west is forgotten; once west is back, its children there go, then
	// the parent.
	proxy.stop()
	require.NoError(t, k8s.Delete(ctx, p.DeepCopy()))
	// A reconcile of before the delete may say ClusterUnreachable first:
	// the deletion's own says why the finalizer stays.
	eventuallyWithin(t, "Synced ClusterUnreachable for the deletion", time.Minute, func(ctx context.Context) (bool, error) {
		c, err := condition(ctx, p, contract.ConditionSynced)
		if err != nil || c == nil {
			return false, err
		}
		if c.Reason != contract.ReasonClusterUnreachable || !strings.Contains(c.Message, "the finalizer is kept until the cluster answers") {
			return false, errors.New(c.Reason + ": " + c.Message)
		}
		return true, nil
	})
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(live), live))
	assert.Contains(t, live.GetFinalizers(), contract.Finalizer)
	require.NoError(t, wk.Get(ctx, client.ObjectKeyFromObject(dep), dep))
	assert.Nil(t, dep.DeletionTimestamp)
	proxy.start()
	eventuallyWithin(t, "the remote children deleted and the parent gone", time.Minute, func(ctx context.Context) (bool, error) {
		if err := wk.Get(ctx, client.ObjectKeyFromObject(dep), &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
			return false, err
		}
		ns := &corev1.Namespace{}
		err := wk.Get(ctx, client.ObjectKey{Name: name}, ns)
		// A bare control plane has no namespace controller to finish it.
		if err == nil && ns.DeletionTimestamp == nil {
			return false, nil
		}
		err = k8s.Get(ctx, client.ObjectKeyFromObject(p), &unstructured.Unstructured{Object: map[string]any{"apiVersion": "multi.cuengine.dev/v1", "kind": "Placement"}})
		return apierrors.IsNotFound(err), nil
	})
}

// waitReason waits for the parent's Synced condition to have reason.
func waitReason(t *testing.T, p *unstructured.Unstructured, reason string) {
	t.Helper()
	eventuallyWithin(t, "Synced "+reason, time.Minute, func(ctx context.Context) (bool, error) {
		c, err := condition(ctx, p, contract.ConditionSynced)
		if err != nil || c == nil {
			return false, err
		}
		if c.Reason != reason {
			return false, errors.New(c.Reason + ": " + c.Message)
		}
		return true, nil
	})
}

func statusOf(eng *engine.Engine) string {
	out := ""
	for _, st := range eng.ClusterStatus() {
		out += st.Name + " " + st.Error + "\n"
	}
	return out
}

// kubeconfigVia is the kubeconfig at path with its server replaced by
// the proxy's address.
func kubeconfigVia(t *testing.T, path, addr string) []byte {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(path)
	require.NoError(t, err)
	for _, c := range kc.Clusters {
		c.Server = "https://" + addr
	}
	b, err := clientcmd.Write(*kc)
	require.NoError(t, err)
	return b
}

// tcpProxy forwards connections to a target, and can be cut (every
// connection closed, none accepted) and restored on the same address:
// an apiserver that stops answering and comes back.
type tcpProxy struct {
	t      *testing.T
	addr   string
	target string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
	wg    sync.WaitGroup
	// hung: connections are accepted and what they carry is held, in
	// both directions, until resume (or stop); woken is signalled then.
	hung  bool
	woken *sync.Cond
}

func startProxy(t *testing.T, host string) *tcpProxy {
	t.Helper()
	u, err := url.Parse(host)
	require.NoError(t, err)
	target := u.Host
	if target == "" {
		target = host
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &tcpProxy{t: t, addr: ln.Addr().String(), target: target, conns: map[net.Conn]bool{}}
	p.woken = sync.NewCond(&p.mu)
	p.serve(ln)
	t.Cleanup(p.stop)
	return p
}

func (p *tcpProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", p.target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns[in], p.conns[out] = true, true
			p.mu.Unlock()
			p.wg.Go(func() { p.pipe(out, in) })
			p.wg.Go(func() { p.pipe(in, out) })
		}
	})
}

// pipe copies src to dst, holding each read while the proxy hangs, and
// closes dst when src ends.
func (p *tcpProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.hung {
				p.woken.Wait()
			}
			p.mu.Unlock()
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// hang makes the cluster behind the proxy one that accepts connections
// and never answers: nothing passes, on the connections open and on new
// ones, until resume.
func (p *tcpProxy) hang() {
	p.mu.Lock()
	p.hung = true
	p.mu.Unlock()
}

// resume lets what hang held pass.
func (p *tcpProxy) resume() {
	p.mu.Lock()
	p.hung = false
	p.woken.Broadcast()
	p.mu.Unlock()
}

// stop closes the listener and every connection, and waits for the
// copies to end.
func (p *tcpProxy) stop() {
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]bool{}
	p.hung = false // what was held meets the closed connections
	p.woken.Broadcast()
	p.mu.Unlock()
	p.wg.Wait()
}

// start listens again on the same address.
func (p *tcpProxy) start() {
	ln, err := net.Listen("tcp", p.addr)
	require.NoError(p.t, err)
	p.serve(ln)
}

// TestWorkloadClusterMove runs two workload control planes: a parent
// whose spec.cluster changes from west to east has its children created
// in east before they are deleted from west, and its local child stays.
func TestWorkloadClusterMove(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	ns := namespace(t)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	workload := map[string]client.Client{}
	for _, name := range []string{"west", "east"} {
		var wc *localcluster.Cluster
		wc, workload[name] = startWorkload(t)
		kubeconfig, err := os.ReadFile(wc.Kubeconfig)
		require.NoError(t, err)
		clusterSecret(t, ns, name, kubeconfig)
	}
	dir := t.TempDir()
	src := strings.Replace(strings.ReplaceAll(placementTemplate, "Placement", "Move"), `clusters: ["west"]`, `clusters: ["west", "east"]`, 1)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "move.cue"), []byte(src), 0o644))
	set, err := templates.Load(dir)
	require.NoError(t, err)
	runEngine(t, set, engine.Options{InstallCRDs: true, ResourceResync: 10 * time.Minute, Clusters: clusters.Secrets{Client: cs.CoreV1(), Namespace: ns}, ClusterProbeEvery: 500 * time.Millisecond})

	moveGVK := schema.GroupVersionKind{Group: "multi.cuengine.dev", Version: "v1", Kind: "Move"}
	p := parent(moveGVK, ns, "mover", map[string]any{"cluster": "west"})
	eventually(t, "the Move CRD served", func(ctx context.Context) (bool, error) {
		err := k8s.Create(ctx, p.DeepCopy())
		return err == nil, err
	})
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), p.DeepCopy()) })
	key := client.ObjectKey{Namespace: "mover", Name: "app"}
	eventuallyWithin(t, "the Deployment in west", time.Minute, func(ctx context.Context) (bool, error) {
		return workload["west"].Get(ctx, key, &appsv1.Deployment{}) == nil, nil
	})

	require.NoError(t, k8s.Patch(ctx, p.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"cluster":"east"}}`))))
	moved := time.Now()
	eventuallyWithin(t, "the Deployment moved to east", time.Minute, func(ctx context.Context) (bool, error) {
		west := &appsv1.Deployment{}
		err := workload["west"].Get(ctx, key, west)
		if err == nil && west.DeletionTimestamp == nil {
			return false, nil // still in west
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		// Gone from west: it must be in east already.
		if err := workload["east"].Get(ctx, key, &appsv1.Deployment{}); err != nil {
			t.Errorf("the Deployment left west before it was in east: %v", err)
			return true, nil
		}
		return true, nil
	})
	t.Logf("moved from west to east in %s", time.Since(moved).Round(time.Millisecond))
	waitReason(t, p, contract.ReasonSynced)
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(moveGVK)
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(p), live))
	inv := live.GetAnnotations()[contract.AnnotationInventory]
	assert.Contains(t, inv, `"east:Deployment.apps/mover/app"`)
	assert.NotContains(t, inv, `"west:Deployment.apps/mover/app"`, "what left west leaves the inventory")
	note := &corev1.ConfigMap{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "note"}, note))
	assert.Equal(t, "east", note.Data["cluster"])
}

// TestWorkloadRegistryFollowsTheTemplates: the engine reads the cluster
// Secrets only while a template's policy.clusters allows a cluster, and
// stops when none does.
func TestWorkloadRegistryFollowsTheTemplates(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	ns := namespace(t)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	// A registration whose apiserver never answers: listed all the same.
	kubeconfig := []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: abc}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`)
	require.NoError(t, k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "far", Labels: map[string]string{contract.LabelCluster: "far"}},
		Data: map[string][]byte{contract.KeyKubeconfig: kubeconfig}}))

	load := func(src string) *templates.Set {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "t.cue"), []byte(src), 0o644))
		set, err := templates.Load(dir)
		require.NoError(t, err)
		return set
	}
	local := load(`parent: {apiVersion: "multi.cuengine.dev/v1", kind: "Stay"}
children: note: {apiVersion: "v1", kind: "ConfigMap", metadata: name: "note"}
`)
	remote := load(`parent: {apiVersion: "multi.cuengine.dev/v1", kind: "Stay"}
policy: clusters: ["far"]
children: note: {cluster: "far", apiVersion: "v1", kind: "ConfigMap", metadata: name: "note"}
`)
	eng, _ := runEngine(t, remote, engine.Options{Clusters: clusters.Secrets{Client: cs.CoreV1(), Namespace: ns}, ClusterProbeEvery: 200 * time.Millisecond})
	registered := func(want bool) func(context.Context) (bool, error) {
		return func(context.Context) (bool, error) {
			st := eng.ClusterStatus()
			return (len(st) == 1 && st[0].Name == "far" && !st[0].Up && st[0].Error != "") == want && (want || len(st) == 0), nil
		}
	}
	eventually(t, "far registered, and down", registered(true))
	eng.SetTemplates(local)
	eventually(t, "the registry stopped with the last template that needs it", registered(false))
	eng.SetTemplates(remote)
	eventually(t, "far registered again", registered(true))
}

// startWorkload starts a workload control plane for the test and returns
// it with an administrator's client of it.
func startWorkload(t *testing.T) (*localcluster.Cluster, client.Client) {
	t.Helper()
	wc, err := localcluster.Start(context.Background(), localcluster.Options{Progress: os.Stderr})
	require.NoError(t, err)
	t.Cleanup(func() { _ = wc.Stop() })
	c, err := client.New(wc.Config, client.Options{Scheme: k8s.Scheme()})
	require.NoError(t, err)
	return wc, c
}

// clusterSecret registers cluster name in ns with kubeconfig, as the
// engine reads registrations, and returns the Secret as created.
func clusterSecret(t *testing.T, ns, name string, kubeconfig []byte) *corev1.Secret {
	t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{contract.LabelCluster: name}},
		Data: map[string][]byte{contract.KeyKubeconfig: kubeconfig}}
	require.NoError(t, k8s.Create(context.Background(), secret.DeepCopy()))
	return secret
}
