package engine_test

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cuengine/engine/contract"
)

// Verbs of the apiserver's request counters.
var (
	writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "APPLY": true, "DELETE": true}
	getVerb    = map[string]bool{"GET": true}
)

// writes reads the apiserver's own request counters and returns the number
// of write requests (create, update, patch, apply, delete) per
// resource[/subresource].
func writes(t *testing.T) map[string]int {
	t.Helper()
	return requests(t, writeVerbs)
}

// requests returns the apiserver's count of requests with one of verbs, per
// resource[/subresource]; dry runs, which write nothing, are not counted.
func requests(t *testing.T, verbs map[string]bool) map[string]int {
	t.Helper()
	return countRequests(t, verbs, false)
}

// dryRuns returns the apiserver's count of dry-run requests with one of
// verbs, per resource[/subresource].
func dryRuns(t *testing.T, verbs map[string]bool) map[string]int {
	t.Helper()
	return countRequests(t, verbs, true)
}

func countRequests(t *testing.T, verbs map[string]bool, dryRun bool) map[string]int {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	require.NoError(t, err)
	out := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 1024*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		labels := parseLabels(line[len("apiserver_request_total{"):strings.LastIndex(line, "}")])
		if !verbs[labels["verb"]] || (labels["dry_run"] != "") != dryRun {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[strings.LastIndex(line, "}")+1:]), 64)
		require.NoError(t, err)
		key := labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		out[key] += int(v)
	}
	return out
}

func parseLabels(s string) map[string]string {
	out := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		if ok {
			out[k] = strings.Trim(v, `"`)
		}
	}
	return out
}

func delta(before, after map[string]int, key string) int { return after[key] - before[key] }

// eventCount counts the events recorded in a namespace, repeats included.
// (The apiserver's counters would also count the events of other tests,
// which the event broadcaster sends when it pleases.)
func eventCount(t *testing.T, ns string) int {
	t.Helper()
	var list eventsv1.EventList
	require.NoError(t, k8s.List(context.Background(), &list, client.InNamespace(ns)))
	n := 0
	for _, ev := range list.Items {
		n++
		if ev.Series != nil {
			n += int(ev.Series.Count) - 1
		}
	}
	return n
}

// settle waits until the write counters stop moving for a while: the engine
// has finished reacting. Bounded; it checks a condition, it does not sleep
// for a fixed time to synchronize. Leases and events are not counted
// cluster-wide, since any engine the package has running renews its leases
// and records events of its own parents; the events of namespace ns (when
// given) must be still too.
func settle(t *testing.T, ns ...string) map[string]int {
	t.Helper()
	read := func() (map[string]int, int) {
		cur := writes(t)
		delete(cur, "leases")
		delete(cur, "events")
		n := 0
		for _, namespace := range ns {
			n += eventCount(t, namespace)
		}
		return cur, n
	}
	deadline := time.Now().Add(30 * time.Second)
	last, lastEvents := read()
	moved := map[string]int{}
	stable := 0
	for time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		cur, events := read()
		if fmt.Sprint(cur) == fmt.Sprint(last) && events == lastEvents {
			stable++
			if stable == 5 { // one second without a write
				return cur
			}
			continue
		}
		for k, v := range cur {
			if v != last[k] {
				moved[k] += v - last[k]
			}
		}
		if events != lastEvents {
			moved["events in "+strings.Join(ns, ",")] += events - lastEvents
		}
		stable, last, lastEvents = 0, cur, events
	}
	t.Fatalf("writes did not settle in 30 s; writes meanwhile, by resource: %v", moved)
	return nil
}

func TestWriteDiscipline(t *testing.T) {
	controlPlane(t)
	ctx := context.Background()
	ns := namespace(t)
	mk := parent(myKindGVK, ns, "counted", map[string]any{"deploymentName": "counted"})
	created := settle(t, ns)
	getsBefore := requests(t, getVerb)
	require.NoError(t, k8s.Create(ctx, mk))
	eventually(t, "Synced", func(ctx context.Context) (bool, error) {
		c, err := condition(ctx, mk, contract.ConditionSynced)
		return c != nil && c.Status == metav1.ConditionTrue, err
	})
	before := settle(t, ns)
	// A new parent costs one apply of its child, one Created event and one
	// status write, which carries Ready, Synced and observedGeneration
	// together: the write the hand-written reference does not make, since
	// it keeps no conditions (docs/benchmarks.md, Writes).
	assert.Equal(t, 1, delta(created, before, "mykinds"), "the test's own create")
	assert.Equal(t, 1, delta(created, before, "deployments"), "one apply of the new child")
	assert.Equal(t, 1, delta(created, before, "mykinds/status"), "one status write")
	assert.Equal(t, 1, eventCount(t, ns), "one Created event")
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(myKindGVK)
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(mk), cur))
	gen, found, err := unstructured.NestedInt64(cur.Object, "status", "observedGeneration")
	require.NoError(t, err)
	assert.True(t, found, "observedGeneration in the first status")
	assert.Equal(t, cur.GetGeneration(), gen)
	for _, c := range []string{contract.ConditionReady, contract.ConditionSynced} {
		cond, err := condition(ctx, mk, c)
		require.NoError(t, err)
		assert.NotNil(t, cond, "%s in the first status", c)
	}
	// The test reads no Deployment itself until here: the engine created
	// the child without reading it first (the create-only apply).
	assert.Equal(t, 0, delta(getsBefore, requests(t, getVerb), "deployments"), "no read of a new child")
	eventsBefore := eventCount(t, ns)

	t.Run("a repeated event writes nothing", func(t *testing.T) {
		// A label on the parent and an annotation on the child each trigger
		// a reconcile whose inputs change nothing the engine writes.
		require.NoError(t, k8s.Patch(ctx, mk, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"team":"a"}}}`))))
		d, err := getDeployment(ctx, ns, "counted")
		require.NoError(t, err)
		require.NoError(t, k8s.Patch(ctx, d, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"note":"x"}}}`))))
		after := settle(t, ns)
		assert.Equal(t, 1, delta(before, after, "deployments"), "only the test's own patch of the Deployment")
		assert.Equal(t, 1, delta(before, after, "mykinds"), "only the test's own patch of the MyKind")
		assert.Equal(t, 0, delta(before, after, "mykinds/status"), "no status write")
		assert.Equal(t, eventsBefore, eventCount(t, ns), "no event for a no-op reconcile")
		before = after
	})

	t.Run("a spec change is one apply and one status write", func(t *testing.T) {
		require.NoError(t, k8s.Patch(ctx, mk, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":2}}`))))
		eventually(t, "replicas 2", func(ctx context.Context) (bool, error) {
			d, err := getDeployment(ctx, ns, "counted")
			return err == nil && *d.Spec.Replicas == 2, err
		})
		after := settle(t, ns)
		assert.Equal(t, 1, delta(before, after, "mykinds"), "the test's patch")
		assert.Equal(t, 1, delta(before, after, "deployments"), "one apply of the changed child")
		assert.Equal(t, 1, delta(before, after, "mykinds/status"), "one status write (observedGeneration)")
		before = after
	})

	t.Run("a child status change is one status write and no apply", func(t *testing.T) {
		markReady(t, ns, "counted", 2)
		eventually(t, "readyReplicas 2", func(ctx context.Context) (bool, error) {
			n, err := readyReplicas(ctx, mk)
			return n == 2, err
		})
		after := settle(t, ns)
		assert.Equal(t, 0, delta(before, after, "deployments"), "no apply")
		assert.Equal(t, 1, delta(before, after, "deployments/status"), "the test's own status update")
		assert.Equal(t, 1, delta(before, after, "mykinds/status"), "one status write")
	})
}
