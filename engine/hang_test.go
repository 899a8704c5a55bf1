package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/clusters"
	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/engine"
	"github.com/cuengine/engine/templates"
)

var spreadGVK = schema.GroupVersionKind{Group: "multi.cuengine.dev", Version: "v1", Kind: "Spread"}

// spreadTemplate keeps a ConfigMap beside the parent and, when the spec
// names a cluster, puts another there.
const spreadTemplate = `parent: {apiVersion: "multi.cuengine.dev/v1", kind: "Spread", spec: {cluster: *"" | string, note: string}}
policy: {crossNamespace: true, clusters: ["west"]}
children: here: {apiVersion: "v1", kind: "ConfigMap", metadata: name: parent.metadata.name + "-here", data: note: parent.spec.note}
if parent.spec.cluster != "" {
	children: there: {
		cluster:    parent.spec.cluster
		apiVersion: "v1"
		kind:       "ConfigMap"
		metadata: {name: parent.metadata.namespace + "-" + parent.metadata.name, namespace: "default"}
		data: note: parent.spec.note
	}
}
`

// TestHangingClusterHoldsNoWorker is issue 53's second attack: the
// workload cluster behind a proxy that accepts connections and never
// answers, while 6 parents placed there change, and 5 parents of the same
// kind that stay local change a second later. Each call to the cluster
// ends within the engine's bound (3 s), and the first that does not
// answer marks the cluster down, so that the other reconciles are told at
// once instead of each waiting: the local parents converge within 5 s of
// their change (before: 30 s, the kind's workers waiting on the calls),
// the remote ones say ClusterUnreachable within 15 s (before: 36 s), their
// local children following their change meanwhile, and once the cluster
// answers again the remote changes land. The defaults throughout (workers,
// probe, bound).
func TestHangingClusterHoldsNoWorker(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	west, wk := startWorkload(t)
	proxy := startProxy(t, west.Config.Host)

	ns := namespace(t)
	clusterSecret(t, ns, "west", kubeconfigVia(t, west.Kubeconfig, proxy.addr))
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "spread.cue"), []byte(spreadTemplate), 0o644))
	set, err := templates.Load(dir)
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	runEngine(t, set, engine.Options{InstallCRDs: true, Clusters: clusters.Secrets{Client: cs.CoreV1(), Namespace: ns}})

	const remotes, locals = 6, 5
	name := func(remote bool, i int) string {
		if remote {
			return fmt.Sprintf("remote-%d", i)
		}
		return fmt.Sprintf("local-%d", i)
	}
	eventually(t, "the Spread CRD served", func(ctx context.Context) (bool, error) {
		err := k8s.Create(ctx, parent(spreadGVK, ns, name(true, 0), map[string]any{"cluster": "west", "note": "one"}))
		return err == nil, err
	})
	for i := 1; i < remotes; i++ {
		require.NoError(t, k8s.Create(ctx, parent(spreadGVK, ns, name(true, i), map[string]any{"cluster": "west", "note": "one"})))
	}
	for i := range locals {
		require.NoError(t, k8s.Create(ctx, parent(spreadGVK, ns, name(false, i), map[string]any{"note": "one"})))
	}
	// notes reports whether every ConfigMap of the parents (remote or
	// local), here or there, carries note.
	notes := func(remote, there bool, n int, note string) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			for i := range n {
				c, key := k8s, client.ObjectKey{Namespace: ns, Name: name(remote, i) + "-here"}
				if there {
					c, key = wk, client.ObjectKey{Namespace: "default", Name: ns + "-" + name(remote, i)}
				}
				cm := &corev1.ConfigMap{}
				if err := c.Get(ctx, key, cm); err != nil || cm.Data["note"] != note {
					return false, client.IgnoreNotFound(err)
				}
			}
			return true, nil
		}
	}
	eventuallyWithin(t, "the remote ConfigMaps in west", time.Minute, notes(true, true, remotes, "one"))
	eventually(t, "the local ConfigMaps", notes(false, false, locals, "one"))
	for i := range remotes {
		waitReason(t, parent(spreadGVK, ns, name(true, i), nil), contract.ReasonSynced)
	}

	setNote := func(remote bool, i int, note string) {
		t.Helper()
		require.NoError(t, k8s.Patch(ctx, parent(spreadGVK, ns, name(remote, i), nil), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"note":"`+note+`"}}`))))
	}
	proxy.hang()
	hung := time.Now()
	for i := range remotes {
		setNote(true, i, "two")
	}
	time.Sleep(time.Second) // the attack's own timing: the local parents change a second later
	changed := time.Now()
	for i := range locals {
		setNote(false, i, "two")
	}
	eventuallyWithin(t, "the local-only parents converged, west hanging", 5*time.Second, notes(false, false, locals, "two"))
	t.Logf("west hanging: the %d local-only parents converged %s after their change", locals, time.Since(changed).Round(time.Millisecond))
	eventuallyWithin(t, "the remote parents' local children followed", 5*time.Second, notes(true, false, remotes, "two"))
	eventuallyWithin(t, "every remote parent ClusterUnreachable", 15*time.Second-time.Since(hung), func(ctx context.Context) (bool, error) {
		for i := range remotes {
			c, err := condition(ctx, parent(spreadGVK, ns, name(true, i), nil), contract.ConditionSynced)
			if err != nil || c == nil || c.Reason != contract.ReasonClusterUnreachable {
				return false, err
			}
		}
		return true, nil
	})
	t.Logf("west hanging: every remote parent ClusterUnreachable %s after the hang began", time.Since(hung).Round(time.Millisecond))

	proxy.resume()
	back := time.Now()
	eventuallyWithin(t, "the remote changes landed once west answers", time.Minute, notes(true, true, remotes, "two"))
	t.Logf("west answering again: the remote changes landed in %s", time.Since(back).Round(time.Millisecond))
	for i := range remotes {
		waitReason(t, parent(spreadGVK, ns, name(true, i), nil), contract.ReasonSynced)
	}
}
