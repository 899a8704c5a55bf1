package gcs

// Integration tests against fake-gcs-server v1.56.1 run in-process (plain
// HTTP on a loopback port), behind a fault-injecting reverse proxy.
//
// The provider reaches the proxy through client options:
// option.WithEndpoint("http://127.0.0.1:PORT/storage/v1/") plus
// option.WithoutAuthentication(), which storage v1.70.0 accepts for a
// plain-HTTP endpoint. STORAGE_EMULATOR_HOST (host:port, "http" assumed when
// no scheme is given) works too and is what a deployment uses: see
// TestEmulatorHostEnvironment. The tests use client options so they do not
// depend on process-wide environment.

import (
	"context"
	"net/http"
	"regexp"
	"sort"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"

	"github.com/cuengine/engine/providers"
)

// emulatorLocation is the location fake-gcs-server reports for every bucket.
const emulatorLocation = "EU"

var (
	insertPath = regexp.MustCompile(`^/storage/v1/b$`)
	anyBucket  = regexp.MustCompile(`^/storage/v1/b/[^/]+$`)
)

// emulatorSpec is a spec the emulator can represent: it always reports
// STANDARD, its configured location and no uniform bucket-level access.
func emulatorSpec(overrides map[string]any) map[string]any {
	s := spec(map[string]any{"location": emulatorLocation, "uniformBucketLevelAccess": false})
	for k, v := range overrides {
		s[k] = v
	}
	return s
}

// newEmulator starts fake-gcs-server on a loopback port.
func newEmulator(t *testing.T) *fakestorage.Server {
	t.Helper()
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme:          "http",
		Host:            "127.0.0.1",
		BucketsLocation: emulatorLocation,
	})
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	return srv
}

// emulatorBuckets lists the emulator's buckets, sorted.
func emulatorBuckets(t *testing.T, srv *fakestorage.Server) []string {
	t.Helper()
	buckets, err := srv.Backend().ListBuckets()
	require.NoError(t, err)
	names := make([]string, 0, len(buckets))
	for _, b := range buckets {
		names = append(names, b.Name)
	}
	sort.Strings(names)
	return names
}

// emulatorSetup starts the emulator, the proxy (keeping labels) and a
// provider with the given per-call timeout.
func emulatorSetup(t *testing.T, timeout time.Duration) (*fakestorage.Server, *faultProxy, *Provider) {
	t.Helper()
	srv := newEmulator(t)
	proxy := newFaultProxy(t, srv.URL(), true)
	return srv, proxy, newTestProvider(t, proxy.URL(), timeout)
}

// (a) The create reaches the emulator but its response is lost (503): the
// storage client retries the insert, gets 409, and the provider adopts its
// own bucket. Exactly one bucket exists.
func TestEmulatorAdoptsBucketAfterLostCreateResponse(t *testing.T) {
	srv, proxy, p := emulatorSetup(t, 5*time.Second)
	req := namedRequest(t, p, testUID, emulatorSpec(nil), 0)
	proxy.inject(&fault{method: http.MethodPost, path: insertPath, times: 1, forwardThen: http.StatusServiceUnavailable})

	obs, err := p.Apply(context.Background(), req)
	require.NoError(t, err)
	assert.True(t, obs.Exists)
	assert.Equal(t, req.ExternalName, obs.State["name"])
	assert.Equal(t, []string{req.ExternalName}, emulatorBuckets(t, srv), "exactly one bucket")
	assert.Equal(t, 1, proxy.count("POST /storage/v1/b -> 503"), "the create was forwarded and its response lost: %v", proxy.log())
	assert.Equal(t, 1, proxy.count("POST /storage/v1/b -> 409"), "the client's retry met our own bucket: %v", proxy.log())

	before := len(proxy.log())
	_, err = p.Apply(context.Background(), req)
	require.NoError(t, err)
	for _, l := range proxy.log()[before:] {
		assert.Regexp(t, `^GET `, l, "a second Apply only reads")
	}
}

// (b) Rate limits and outages: the storage client retries the idempotent
// calls (bucket get, insert and delete are all idempotent in v1.70.0) and
// the provider succeeds without the engine's help.
func TestEmulatorRetriesRateLimitsAndOutages(t *testing.T) {
	srv, proxy, p := emulatorSetup(t, 10*time.Second)
	req := namedRequest(t, p, testUID, emulatorSpec(nil), 0)
	proxy.inject(
		&fault{method: http.MethodGet, path: anyBucket, times: 2, status: http.StatusServiceUnavailable},
		&fault{method: http.MethodPost, path: insertPath, times: 2, status: http.StatusTooManyRequests},
		&fault{method: http.MethodPost, path: insertPath, times: 1, status: http.StatusServiceUnavailable},
	)

	_, err := p.Apply(context.Background(), req)
	require.NoError(t, err, "proxy log: %v", proxy.log())
	assert.Equal(t, []string{req.ExternalName}, emulatorBuckets(t, srv))
	assert.Equal(t, 2, proxy.count("POST /storage/v1/b -> 429"))
	assert.Equal(t, 1, proxy.count("POST /storage/v1/b -> 503"))
	assert.Equal(t, 1, proxy.count("POST /storage/v1/b -> 200"))

	proxy.inject(&fault{method: http.MethodDelete, path: anyBucket, times: 2, status: http.StatusServiceUnavailable})
	require.NoError(t, p.Delete(context.Background(), req), "proxy log: %v", proxy.log())
	assert.Empty(t, emulatorBuckets(t, srv))
}

// Persistent 503s exhaust the client's retries: a retryable Unavailable,
// so the engine backs off and tries again.
func TestEmulatorPersistentOutageIsRetryable(t *testing.T) {
	srv := newEmulator(t)
	proxy := newFaultProxy(t, srv.URL(), true)
	p, err := New(context.Background(), Options{
		CallTimeout: 5 * time.Second,
		ClientOptions: []option.ClientOption{
			option.WithEndpoint(proxy.URL() + "/storage/v1/"),
			option.WithoutAuthentication(),
		},
		RetryOptions: append([]storage.RetryOption{storage.WithMaxAttempts(3)}, fastRetry...),
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	req := namedRequest(t, p, testUID, emulatorSpec(nil), 0)
	proxy.inject(&fault{status: http.StatusServiceUnavailable})

	_, err = p.Apply(context.Background(), req)
	requireReason(t, err, providers.ReasonUnavailable, true)
	assert.Equal(t, 3, proxy.count("GET "), "the client retried before giving up: %v", proxy.log())
}

// (c) 403 everywhere: a terminal CredentialsError telling how to provide
// credentials, and nothing created or deleted.
func TestEmulatorForbiddenIsCredentialsError(t *testing.T) {
	srv, proxy, p := emulatorSetup(t, 5*time.Second)
	req := namedRequest(t, p, testUID, emulatorSpec(nil), 0)
	proxy.inject(&fault{status: http.StatusForbidden})

	_, err := p.Apply(context.Background(), req)
	pe := requireReason(t, err, providers.ReasonCredentialsError, false)
	assert.Contains(t, pe.Error(), "GOOGLE_APPLICATION_CREDENTIALS")
	assert.Contains(t, pe.Error(), "Workload Identity")
	assert.Empty(t, emulatorBuckets(t, srv))

	_, err = p.Observe(context.Background(), req)
	requireReason(t, err, providers.ReasonCredentialsError, false)
	requireReason(t, p.Delete(context.Background(), req), providers.ReasonCredentialsError, false)
}

// (d) Responses slower than the per-call timeout: a retryable Timeout,
// returned in bounded time even though the caller's context has no deadline.
func TestEmulatorSlowResponsesTimeOut(t *testing.T) {
	srv, proxy, p := emulatorSetup(t, 200*time.Millisecond)
	req := namedRequest(t, p, testUID, emulatorSpec(nil), 0)
	proxy.inject(&fault{stall: true})

	for name, call := range map[string]func() error{
		"apply":   func() error { _, err := p.Apply(context.Background(), req); return err },
		"observe": func() error { _, err := p.Observe(context.Background(), req); return err },
		"delete":  func() error { return p.Delete(context.Background(), req) },
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			pe := requireReason(t, call(), providers.ReasonTimeout, true)
			assert.Contains(t, pe.Error(), "per-call timeout of 200ms")
			assert.Less(t, time.Since(start), 5*time.Second)
		})
	}
	assert.Empty(t, emulatorBuckets(t, srv))
}

// The emulator answers 412 to deleting a non-empty bucket (GCS answers
// 409); the provider checks emptiness first, so the answer is the same.
func TestEmulatorDeleteNonEmptyAndForceDestroy(t *testing.T) {
	srv, _, p := emulatorSetup(t, 5*time.Second)
	req := namedRequest(t, p, testUID, emulatorSpec(map[string]any{"versioning": true}), 0)
	_, err := p.Apply(context.Background(), req)
	require.NoError(t, err)
	for _, content := range []string{"v1", "v2", "v3"} {
		srv.CreateObject(fakestorage.Object{
			ObjectAttrs: fakestorage.ObjectAttrs{BucketName: req.ExternalName, Name: "report.csv"},
			Content:     []byte(content),
		})
	}
	srv.CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: req.ExternalName, Name: "dir/other"}, Content: []byte("x")})
	gens, err := srv.ListObjectsWithOptionsPaginated(req.ExternalName, fakestorage.ListOptions{Versions: true})
	require.NoError(t, err)
	require.Greater(t, len(gens.Objects), 2, "the emulator keeps noncurrent generations")

	err = p.Delete(context.Background(), req)
	requireReason(t, err, ReasonBucketNotEmpty, false)
	assert.Equal(t, []string{req.ExternalName}, emulatorBuckets(t, srv))

	req.Spec["forceDestroy"] = true
	require.NoError(t, p.Delete(context.Background(), req))
	assert.Empty(t, emulatorBuckets(t, srv))
}

// Without the proxy's label memory the emulator drops the ownership label:
// the provider cannot prove the bucket is its own and refuses to adopt or
// change it rather than guess.
func TestEmulatorWithoutLabelsNeverAdopts(t *testing.T) {
	srv := newEmulator(t)
	proxy := newFaultProxy(t, srv.URL(), false)
	p := newTestProvider(t, proxy.URL(), 5*time.Second)
	req := namedRequest(t, p, testUID, emulatorSpec(nil), 0)

	_, err := p.Apply(context.Background(), req)
	require.NoError(t, err, "the create itself works")

	before := len(proxy.log())
	_, err = p.Apply(context.Background(), req)
	requireReason(t, err, providers.ReasonNameConflict, false)
	requireReason(t, p.Delete(context.Background(), req), providers.ReasonNameConflict, false)
	for _, l := range proxy.log()[before:] {
		assert.Regexp(t, `^GET `, l, "an unprovable bucket is only read")
	}
	assert.Equal(t, []string{req.ExternalName}, emulatorBuckets(t, srv))
}

// STORAGE_EMULATOR_HOST alone (no client options, no credentials) points
// the client at the emulator.
func TestEmulatorHostEnvironment(t *testing.T) {
	srv := newEmulator(t)
	proxy := newFaultProxy(t, srv.URL(), true)
	t.Setenv("STORAGE_EMULATOR_HOST", proxy.srv.Listener.Addr().String())
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")

	p, err := New(context.Background(), Options{CallTimeout: 5 * time.Second, RetryOptions: fastRetry})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	req := namedRequest(t, p, testUID, emulatorSpec(nil), 0)

	_, err = p.Apply(context.Background(), req)
	require.NoError(t, err)
	assert.Equal(t, []string{req.ExternalName}, emulatorBuckets(t, srv))
	assert.Equal(t, 1, proxy.count("POST /storage/v1/b -> 200"), "the request went through the emulator host")
	require.NoError(t, p.Delete(context.Background(), req))
	assert.Empty(t, emulatorBuckets(t, srv))
}

// The storage client does not retry a non-idempotent update without a
// precondition; the provider always sends one, so an outage during an
// update is retried by the client too.
func TestEmulatorUpdateIsRetriedWithPrecondition(t *testing.T) {
	_, proxy, p := emulatorSetup(t, 5*time.Second)
	req := namedRequest(t, p, testUID, emulatorSpec(nil), 0)
	_, err := p.Apply(context.Background(), req)
	require.NoError(t, err)

	proxy.inject(&fault{method: http.MethodPatch, times: 1, status: http.StatusServiceUnavailable})
	req.Spec["versioning"] = true
	req.Spec["labels"] = map[string]any{"team": "data"}
	obs, err := p.Apply(context.Background(), req)
	require.NoError(t, err, "proxy log: %v", proxy.log())
	assert.Equal(t, true, obs.State["versioning"])
	assert.Equal(t, "data", obs.State["labels"].(map[string]any)["team"])
	assert.Equal(t, 1, proxy.count("PATCH "+"/storage/v1/b/"+req.ExternalName+" -> 503"))
	assert.Equal(t, 1, proxy.count("PATCH "+"/storage/v1/b/"+req.ExternalName+" -> 200"))

	attrs, err := p.client.Bucket(req.ExternalName).Attrs(context.Background())
	require.NoError(t, err)
	assert.True(t, attrs.VersioningEnabled)
}
