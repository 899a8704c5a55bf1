package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// The flood's kinds: Note, whose schema the CRD carries whole (no
// admission); Post, with a cross-field constraint the webhook checks;
// Doc, with two versions the webhook converts (the examples/versions
// App's conversion).
const (
	floodNote = `parent: {apiVersion: "flood.cuengine.dev/v1", kind: "Note", spec: text: *"" | string}
children: config: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: parent.metadata.name
	data: text: parent.spec.text
}
`
	floodPost = `parent: {
	apiVersion: "flood.cuengine.dev/v1"
	kind:       "Post"
	spec: {
		minReplicas: *1 | int & >=0
		replicas:    *2 | int & >=minReplicas & <=10
	}
}
children: config: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: parent.metadata.name
	data: replicas: "\(parent.spec.replicas)"
}
`
	floodDoc = `parent: {
	apiVersion: "flood.cuengine.dev/v2"
	kind:       "Doc"
	spec: container: {image: string, replicas: *1 | int & >=0 & <=10}
}
versions: {
	v2: storage: true
	v1: {
		spec: {image: string, replicas: *1 | int & >=0}
		toHub: {in: _, out: spec: container: {image: in.spec.image, replicas: in.spec.replicas}}
		fromHub: {in: _, out: spec: {image: in.spec.container.image, replicas: in.spec.container.replicas}}
	}
}
children: config: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: parent.metadata.name
	data: image: parent.spec.container.image
}
`
)

// TestWebhookFloodSlowsReconcilesLittle is issue 51's attack on the
// webhook port: anyone who reaches it (no client CA, the default) posts
// 5,000-object ConversionReviews from 8 clients at once, the whole time.
// Before the port's bounds that slowed a new parent's child from 0.58s to
// 3.3s. Now conversions and validations run in the evaluator processes,
// at the lowest CPU priority, a flood of one kind and namespace waiting
// for its own share of them: new Notes (reconciled, no admission) get
// their ConfigMaps within 1.5 times the time they take without the flood
// (the median of 100 parents, in rounds alternating); Posts, admitted by
// the same webhook, are served too. A 60
// MB review is refused (413) and costs the engine no 150 MiB.
func TestWebhookFloodSlowsReconcilesLittle(t *testing.T) {
	dir := t.TempDir()
	for name, src := range map[string]string{"note.cue": floodNote, "post.cue": floodPost, "doc.cue": floodDoc} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644))
	}
	ns := namespace(t)
	port := freePort(t)
	configuration := "flood.cuengine.dev"
	engine := startEngine(t, dir, "--install-crds",
		"--webhook-port", strconv.Itoa(port), "--webhook-url", fmt.Sprintf("https://localhost:%d", port),
		"--webhook-namespace", ns, "--webhook-cert-dir", t.TempDir(), "--webhook-configuration", configuration)
	t.Cleanup(func() {
		_, _ = kubectlErr("delete", "validatingwebhookconfiguration", configuration, "--ignore-not-found")
		_, _ = kubectlErr("delete", "crd", "notes.flood.cuengine.dev", "posts.flood.cuengine.dev", "docs.flood.cuengine.dev", "--ignore-not-found", "--wait=false")
	})
	eventually(t, "a first Post admitted (the apiserver reaches the webhook)", 2*time.Minute, func(ctx context.Context) (bool, error) {
		err := create(ctx, ns, "Post", "warm-0")
		return err == nil || apierrors.IsAlreadyExists(err), nil
	})
	eventually(t, "the first Post served", time.Minute, func(ctx context.Context) (bool, error) {
		return served(ctx, ns, "warm", 1)
	})
	client := &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // an attacker's
	url := fmt.Sprintf("https://127.0.0.1:%d/convert", port)

	t.Run("a 60 MB review is refused without costing 150 MiB", func(t *testing.T) {
		pid := engine.cmd.Process.Pid
		before, ok := statusField(fmt.Sprintf("/proc/%d/status", pid), "VmRSS:")
		require.True(t, ok)
		peak := sampleVmRSS(t, pid)
		big := bigConversionReview(t, ns, 60<<20)
		for _, known := range []bool{true, false} {
			var body io.Reader = bytes.NewReader(big)
			if !known {
				body = io.MultiReader(body) // no Content-Length: sent chunked, cut at the bound
			}
			resp, err := client.Post(url, "application/json", body)
			require.NoError(t, err)
			msg, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, string(msg))
			assert.Contains(t, string(msg), "more than the 33554432")
		}
		grew := (peak() - before) >> 10
		t.Logf("a 60 MB ConversionReview, with and without Content-Length: the engine's RSS grew by at most %d MiB", grew)
		assert.Less(t, grew, int64(150), "MiB")
	})

	flood := conversionReview(t, ns, 5000)
	var converted, refused atomic.Int64
	flooding := func() (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for ctx.Err() == nil {
					req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(flood))
					req.Header.Set("Content-Type", "application/json")
					resp, err := client.Do(req)
					if err != nil {
						continue // stopped
					}
					if resp.StatusCode == http.StatusOK && convertedAll(resp.Body, 5000) {
						converted.Add(1)
					} else {
						refused.Add(1)
					}
					resp.Body.Close()
				}
			})
		}
		return func() { cancel(); wg.Wait() }
	}

	// Notes need no admission: their times are the reconciles'. Posts go
	// through /validate, as the flood's reviews go through /convert. Each
	// parent's time is from its create to its ConfigMap's arrival on a
	// watch, pooled over rounds that alternate calm and flood: 100
	// parents a side, whose median does not hang on one slow batch.
	seen := watchArrivals(t, ns)
	var calm, flooded, calmPosts, floodedPosts []time.Duration
	for round := range 5 {
		calm = append(calm, serve(t, seen, ns, "Note", fmt.Sprintf("calm-%d", round), 20)...)
		calmPosts = append(calmPosts, serve(t, seen, ns, "Post", fmt.Sprintf("calm-post-%d", round), 20)...)
		stop := flooding()
		before := converted.Load() + refused.Load()
		eventually(t, "the flood under way: a first review answered", 3*time.Minute, func(context.Context) (bool, error) {
			return converted.Load()+refused.Load() > before, nil
		})
		flooded = append(flooded, serve(t, seen, ns, "Note", fmt.Sprintf("flood-%d", round), 20)...)
		floodedPosts = append(floodedPosts, serve(t, seen, ns, "Post", fmt.Sprintf("flood-post-%d", round), 20)...)
		stop()
	}
	ratio := float64(median(flooded)) / float64(median(calm))
	t.Logf("100 new Notes, each from create to its ConfigMap: median %v, 90th %v without the flood, %v, %v under it (medians: %.2fx); 100 new Posts admitted and reconciled: %v, %v and %v, %v (%.2fx); the flood's 5,000-object reviews: %d converted, %d refused",
		median(calm), quantile(calm, 0.9), median(flooded), quantile(flooded, 0.9), ratio,
		median(calmPosts), quantile(calmPosts, 0.9), median(floodedPosts), quantile(floodedPosts, 0.9),
		float64(median(floodedPosts))/float64(median(calmPosts)), converted.Load(), refused.Load())
	assert.Positive(t, converted.Load(), "the flood was served, not only refused")
	assert.LessOrEqual(t, ratio, 1.5, "the flood slows reconciles by at most 1.5x")
}

// median is the middle of d (sorted in place).
func median(d []time.Duration) time.Duration { return quantile(d, 0.5) }

// quantile is the q-th quantile of d, nearest rank (sorted in place).
func quantile(d []time.Duration, q float64) time.Duration {
	slices.Sort(d)
	return d[int(q*float64(len(d)-1)+0.5)]
}

// arrivals is when each ConfigMap of a namespace was first seen.
type arrivals struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

// watchArrivals watches ns's ConfigMaps from now until the test ends.
func watchArrivals(t *testing.T, ns string) *arrivals {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	list, err := kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return kube.CoreV1().ConfigMaps(ns).Watch(ctx, o)
		},
	})
	require.NoError(t, err)
	a := &arrivals{seen: map[string]time.Time{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok && ev.Type == watch.Added {
				a.mu.Lock()
				if _, ok := a.seen[cm.Name]; !ok {
					a.seen[cm.Name] = time.Now()
				}
				a.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { cancel(); w.Stop(); <-w.Done(); <-done })
	return a
}

// serve creates n parents of kind (Note or Post) prefix-0..n-1 at once
// and returns the time from each one's create to its ConfigMap's arrival.
func serve(t *testing.T, seen *arrivals, ns, kind, prefix string, n int) []time.Duration {
	t.Helper()
	started := make([]time.Time, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			started[i] = time.Now()
			assert.NoError(t, create(context.Background(), ns, kind, prefix+"-"+strconv.Itoa(i)))
		})
	}
	wg.Wait()
	took := make([]time.Duration, n)
	eventually(t, fmt.Sprintf("%d %ss %s-* served, seen on the watch", n, kind, prefix), 2*time.Minute, func(context.Context) (bool, error) {
		seen.mu.Lock()
		defer seen.mu.Unlock()
		for i := range n {
			at, ok := seen.seen[prefix+"-"+strconv.Itoa(i)]
			if !ok {
				return false, nil
			}
			took[i] = at.Sub(started[i])
		}
		return true, nil
	})
	return took
}

// convertedAll reports whether body is a ConversionReview answered with
// success and n objects. It counts the objects' kinds rather than decoding
// them, so that the attacker's clients take little of the machine's CPU
// from the engine they measure.
func convertedAll(body io.Reader, n int) bool {
	b, err := io.ReadAll(body)
	if err != nil {
		return false
	}
	return bytes.Count(b, []byte(`"kind":"Doc"`)) == n && bytes.Contains(b, []byte(`"status":"Success"`))
}

// served reports whether n ConfigMaps named prefix-* exist in ns.
func served(ctx context.Context, ns, prefix string, n int) (bool, error) {
	cms, err := kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	got := 0
	for _, cm := range cms.Items {
		if strings.HasPrefix(cm.Name, prefix+"-") {
			got++
		}
	}
	return got >= n, nil
}

// create creates the Note or Post ns/name.
func create(ctx context.Context, ns, kind, name string) error {
	spec := map[string]any{"text": name}
	if kind == "Post" {
		spec = map[string]any{"minReplicas": 1, "replicas": 3}
	}
	gvr := schema.GroupVersionResource{Group: "flood.cuengine.dev", Version: "v1", Resource: strings.ToLower(kind) + "s"}
	_, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "flood.cuengine.dev/v1", "kind": kind,
		"metadata": map[string]any{"name": name},
		"spec":     spec,
	}}, metav1.CreateOptions{})
	return err
}

// conversionReview is a ConversionReview of n v1 Docs to v2, encoded.
func conversionReview(t *testing.T, ns string, n int) []byte {
	t.Helper()
	objs := make([]runtime.RawExtension, n)
	for i := range objs {
		raw, err := json.Marshal(map[string]any{
			"apiVersion": "flood.cuengine.dev/v1", "kind": "Doc",
			"metadata": map[string]any{"name": "flood-" + strconv.Itoa(i), "namespace": ns, "uid": "u-" + strconv.Itoa(i)},
			"spec":     map[string]any{"image": "nginx:1.27", "replicas": 3},
		})
		require.NoError(t, err)
		objs[i] = runtime.RawExtension{Raw: raw}
	}
	b, err := json.Marshal(apiextensionsv1.ConversionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview"},
		Request:  &apiextensionsv1.ConversionRequest{UID: "flood", DesiredAPIVersion: "flood.cuengine.dev/v2", Objects: objs},
	})
	require.NoError(t, err)
	return b
}

// bigConversionReview is a ConversionReview of at least size bytes.
func bigConversionReview(t *testing.T, ns string, size int) []byte {
	t.Helper()
	one := len(conversionReview(t, ns, 1))
	b := conversionReview(t, ns, size/one*2)
	require.GreaterOrEqual(t, len(b), size)
	return b
}

// sampleVmRSS samples pid's VmRSS every 20ms until the returned func,
// which stops and returns the peak in KiB.
func sampleVmRSS(t *testing.T, pid int) func() int64 {
	return samplePeak(t, 20*time.Millisecond, func() (int64, bool) {
		return statusField(fmt.Sprintf("/proc/%d/status", pid), "VmRSS:")
	})
}
