package gcsemulator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"

	"github.com/cuengine/engine/providers"
	"github.com/cuengine/engine/providers/gcs"
)

const (
	testProject = "dev-project"
	testUID     = "0b6f3c1e-8d2a-4f57-9c3e-2a1d5e7f9b10"
	otherUID    = "7e2d9a40-1c3b-4e5f-8a6b-9c0d1e2f3a4b"
)

// start starts an emulator and stops it when the test ends.
func start(t *testing.T, opts Options) *Emulator {
	t.Helper()
	e, err := Start(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, e.Stop()) })
	return e
}

// newClient returns a storage client configured only by
// STORAGE_EMULATOR_HOST=e.Host(), the client's own convention.
func newClient(t *testing.T, e *Emulator) *storage.Client {
	t.Helper()
	t.Setenv("STORAGE_EMULATOR_HOST", e.Host())
	client, err := storage.NewClient(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, client.Close()) })
	return client
}

// requireCode asserts that err is a JSON API error with the given code.
func requireCode(t *testing.T, err error, code int) *googleapi.Error {
	t.Helper()
	require.Error(t, err)
	var gerr *googleapi.Error
	require.True(t, errors.As(err, &gerr), "error %v is not a *googleapi.Error", err)
	require.Equal(t, code, gerr.Code, "error: %v", err)
	return gerr
}

// bucketNames are the names Buckets reports.
func bucketNames(t *testing.T, e *Emulator) []string {
	t.Helper()
	buckets, err := e.Buckets(context.Background())
	require.NoError(t, err)
	names := []string{}
	for _, b := range buckets {
		names = append(names, b.Name)
	}
	return names
}

func TestStartAddresses(t *testing.T) {
	e := start(t, Options{})
	assert.Regexp(t, `^127\.0\.0\.1:[0-9]+$`, e.Host())
	assert.Equal(t, "http://"+e.Host(), e.URL())

	resp, err := http.Get(e.URL() + "/_internal/healthcheck")
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	// An emulator listening on every address is reached over loopback.
	all := start(t, Options{Addr: "0.0.0.0:0"})
	assert.Regexp(t, `^127\.0\.0\.1:[0-9]+$`, all.Host())
	assert.Empty(t, bucketNames(t, all))
}

func TestStartFailsOnBusyAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()

	_, err = Start(Options{Addr: ln.Addr().String()})
	require.Error(t, err)
	assert.Contains(t, err.Error(), ln.Addr().String())
}

func TestStopIsIdempotent(t *testing.T) {
	e, err := Start(Options{})
	require.NoError(t, err)
	require.NoError(t, e.Stop())
	require.NoError(t, e.Stop())

	_, err = e.Buckets(context.Background())
	require.Error(t, err, "the front no longer answers")
}

// The Go client, pointed at the emulator by STORAGE_EMULATOR_HOST alone,
// sees bucket metadata as on GCS and can use objects.
func TestGoClientBucketLifecycle(t *testing.T) {
	e := start(t, Options{})
	client := newClient(t, e)
	ctx := context.Background()
	bkt := client.Bucket("dev-data")

	require.NoError(t, bkt.Create(ctx, testProject, &storage.BucketAttrs{
		Location:                 "europe-west1",
		StorageClass:             "NEARLINE",
		Labels:                   map[string]string{"team": "data", "env": "dev"},
		UniformBucketLevelAccess: storage.UniformBucketLevelAccess{Enabled: true},
	}))
	attrs, err := bkt.Attrs(ctx)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"team": "data", "env": "dev"}, attrs.Labels)
	assert.Equal(t, "EUROPE-WEST1", attrs.Location)
	assert.Equal(t, "region", attrs.LocationType)
	assert.Equal(t, "NEARLINE", attrs.StorageClass)
	assert.True(t, attrs.UniformBucketLevelAccess.Enabled)
	assert.Equal(t, int64(1), attrs.MetaGeneration)

	// Update labels, guarded by the metageneration, as providers/gcs does.
	var ua storage.BucketAttrsToUpdate
	ua.SetLabel("team", "platform")
	ua.DeleteLabel("env")
	ua.SetLabel("tier", "gold")
	updated, err := bkt.If(storage.BucketConditions{MetagenerationMatch: 1}).Update(ctx, ua)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"team": "platform", "tier": "gold"}, updated.Labels)
	assert.Equal(t, int64(2), updated.MetaGeneration)
	assert.Equal(t, "NEARLINE", updated.StorageClass, "a label patch keeps the other fields")
	attrs, err = bkt.Attrs(ctx)
	require.NoError(t, err)
	assert.Equal(t, updated.Labels, attrs.Labels)

	// A stale metageneration is refused and changes nothing.
	var stale storage.BucketAttrsToUpdate
	stale.SetLabel("team", "stale")
	_, err = bkt.If(storage.BucketConditions{MetagenerationMatch: 1}).Update(ctx, stale)
	requireCode(t, err, http.StatusPreconditionFailed)
	attrs, err = bkt.Attrs(ctx)
	require.NoError(t, err)
	assert.Equal(t, "platform", attrs.Labels["team"])

	// Other mutable fields.
	updated, err = bkt.Update(ctx, storage.BucketAttrsToUpdate{
		StorageClass:             "COLDLINE",
		UniformBucketLevelAccess: &storage.UniformBucketLevelAccess{Enabled: false},
	})
	require.NoError(t, err)
	assert.Equal(t, "COLDLINE", updated.StorageClass)
	assert.False(t, updated.UniformBucketLevelAccess.Enabled)
	assert.Equal(t, int64(3), updated.MetaGeneration)

	// Objects: write, list, read, delete.
	for name, content := range map[string]string{"a.txt": "alpha", "dir/b.txt": "beta"} {
		w := bkt.Object(name).NewWriter(ctx)
		_, err := io.WriteString(w, content)
		require.NoError(t, err)
		require.NoError(t, w.Close())
	}
	assert.Equal(t, []string{"a.txt", "dir/b.txt"}, listObjects(t, bkt))
	r, err := bkt.Object("dir/b.txt").NewReader(ctx)
	require.NoError(t, err)
	content, err := io.ReadAll(r)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	assert.Equal(t, "beta", string(content))

	err = bkt.Delete(ctx)
	requireCode(t, err, http.StatusConflict) // not empty, as GCS answers
	require.NoError(t, bkt.Object("a.txt").Delete(ctx))
	require.NoError(t, bkt.Object("dir/b.txt").Delete(ctx))
	assert.Empty(t, listObjects(t, bkt))

	// Delete, guarded by the metageneration.
	err = bkt.If(storage.BucketConditions{MetagenerationMatch: 2}).Delete(ctx)
	requireCode(t, err, http.StatusPreconditionFailed)
	require.NoError(t, bkt.If(storage.BucketConditions{MetagenerationMatch: 3}).Delete(ctx))
	_, err = bkt.Attrs(ctx)
	require.ErrorIs(t, err, storage.ErrBucketNotExist)
	assert.Empty(t, bucketNames(t, e))
}

// listObjects lists the names of a bucket's objects.
func listObjects(t *testing.T, bkt *storage.BucketHandle) []string {
	t.Helper()
	names := []string{}
	it := bkt.Objects(context.Background(), nil)
	for {
		o, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return names
		}
		require.NoError(t, err)
		names = append(names, o.Name)
	}
}

// GCS defaults apply to what an insert leaves out.
func TestGoClientBucketDefaults(t *testing.T) {
	e := start(t, Options{})
	client := newClient(t, e)
	ctx := context.Background()
	bkt := client.Bucket("plain")
	require.NoError(t, bkt.Create(ctx, testProject, nil))

	attrs, err := bkt.Attrs(ctx)
	require.NoError(t, err)
	assert.Empty(t, attrs.Labels)
	assert.Equal(t, "US", attrs.Location)
	assert.Equal(t, "multi-region", attrs.LocationType)
	assert.Equal(t, "STANDARD", attrs.StorageClass)
	assert.False(t, attrs.UniformBucketLevelAccess.Enabled)
	assert.False(t, attrs.VersioningEnabled)

	// The same name again is a conflict.
	requireCode(t, bkt.Create(ctx, testProject, nil), http.StatusConflict)
}

// fake-gcs-server resets versioning on every bucket patch; the front keeps
// it unless the patch names it.
func TestPatchKeepsVersioning(t *testing.T) {
	e := start(t, Options{})
	client := newClient(t, e)
	ctx := context.Background()
	bkt := client.Bucket("versioned")
	require.NoError(t, bkt.Create(ctx, testProject, &storage.BucketAttrs{VersioningEnabled: true}))

	var ua storage.BucketAttrsToUpdate
	ua.SetLabel("team", "data")
	attrs, err := bkt.Update(ctx, ua)
	require.NoError(t, err)
	assert.True(t, attrs.VersioningEnabled, "a label patch keeps versioning")

	attrs, err = bkt.Update(ctx, storage.BucketAttrsToUpdate{VersioningEnabled: false})
	require.NoError(t, err)
	assert.False(t, attrs.VersioningEnabled)
	assert.Equal(t, "data", attrs.Labels["team"])
	attrs, err = bkt.Update(ctx, storage.BucketAttrsToUpdate{VersioningEnabled: true})
	require.NoError(t, err)
	assert.True(t, attrs.VersioningEnabled)
}

// Labels and storage classes GCS refuses are refused, and nothing is
// created.
func TestInvalidBucketMetadataIsRefused(t *testing.T) {
	e := start(t, Options{})
	client := newClient(t, e)
	ctx := context.Background()

	err := client.Bucket("bad-label").Create(ctx, testProject, &storage.BucketAttrs{Labels: map[string]string{"Team": "x"}})
	gerr := requireCode(t, err, http.StatusBadRequest)
	assert.Contains(t, gerr.Message, `invalid label key "Team"`)
	err = client.Bucket("bad-class").Create(ctx, testProject, &storage.BucketAttrs{StorageClass: "GLACIER"})
	requireCode(t, err, http.StatusBadRequest)
	assert.Empty(t, bucketNames(t, e))

	bkt := client.Bucket("good")
	require.NoError(t, bkt.Create(ctx, testProject, nil))
	var ua storage.BucketAttrsToUpdate
	ua.SetLabel("ok", "Not OK")
	_, err = bkt.Update(ctx, ua)
	requireCode(t, err, http.StatusBadRequest)
	attrs, err := bkt.Attrs(ctx)
	require.NoError(t, err)
	assert.Empty(t, attrs.Labels)
	assert.Equal(t, int64(1), attrs.MetaGeneration)

	_, err = client.Bucket("missing").Update(ctx, ua)
	requireCode(t, err, http.StatusNotFound)
	requireCode(t, client.Bucket("missing").Delete(ctx), http.StatusNotFound)
}

// Buckets and the client's own listing, page by page, carry every bucket's
// labels.
func TestListingCarriesLabels(t *testing.T) {
	e := start(t, Options{})
	e.pageSize = 2
	client := newClient(t, e)
	ctx := context.Background()
	for i := range 5 {
		name := fmt.Sprintf("bucket-%d", i)
		require.NoError(t, client.Bucket(name).Create(ctx, testProject, &storage.BucketAttrs{
			Labels: map[string]string{"index": fmt.Sprint(i)},
		}))
	}

	buckets, err := e.Buckets(ctx)
	require.NoError(t, err)
	require.Len(t, buckets, 5)
	for i, b := range buckets {
		assert.Equal(t, BucketInfo{
			Name:         fmt.Sprintf("bucket-%d", i),
			Labels:       map[string]string{"index": fmt.Sprint(i)},
			Location:     "US",
			StorageClass: "STANDARD",
		}, b)
	}

	it := client.Buckets(ctx, testProject)
	it.PageInfo().MaxSize = 2
	n := 0
	for {
		attrs, err := it.Next()
		if errors.Is(err, iterator.Done) {
			break
		}
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("bucket-%d", n), attrs.Name)
		assert.Equal(t, map[string]string{"index": fmt.Sprint(n)}, attrs.Labels)
		n++
	}
	assert.Equal(t, 5, n)
}

// Concurrent label patches are all kept, each one a new metageneration.
func TestConcurrentLabelPatches(t *testing.T) {
	e := start(t, Options{})
	client := newClient(t, e)
	ctx := context.Background()
	bkt := client.Bucket("busy")
	require.NoError(t, bkt.Create(ctx, testProject, nil))

	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			var ua storage.BucketAttrsToUpdate
			ua.SetLabel(fmt.Sprintf("k%d", i), "v")
			_, errs[i] = bkt.Update(ctx, ua)
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))

	attrs, err := bkt.Attrs(ctx)
	require.NoError(t, err)
	assert.Len(t, attrs.Labels, n)
	assert.Equal(t, int64(1+n), attrs.MetaGeneration)
}

// fake-gcs-server's configuration and reset endpoints are not reachable.
func TestInternalEndpointsDisabled(t *testing.T) {
	e := start(t, Options{})
	for _, path := range []string{"/_internal/config", "/_internal/delete_all"} {
		req, err := http.NewRequest(http.MethodPut, e.URL()+path, strings.NewReader(`{"externalUrl":"http://elsewhere"}`))
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, path)
	}
}

// With a storage directory, buckets, objects and labels survive a restart
// of the emulator; versioning is refused.
func TestDirSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()

	first, err := Start(Options{Dir: dir})
	require.NoError(t, err)
	client := newClient(t, first)
	bkt := client.Bucket("kept")
	require.NoError(t, bkt.Create(ctx, testProject, &storage.BucketAttrs{
		Location: "EU",
		Labels:   map[string]string{gcs.OwnerLabel: testUID},
	}))
	w := bkt.Object("report.csv").NewWriter(ctx)
	_, err = io.WriteString(w, "a,b\n")
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.NoError(t, client.Bucket("gone").Create(ctx, testProject, &storage.BucketAttrs{Labels: map[string]string{"x": "y"}}))

	err = client.Bucket("versioned").Create(ctx, testProject, &storage.BucketAttrs{VersioningEnabled: true})
	gerr := requireCode(t, err, http.StatusBadRequest)
	assert.Contains(t, gerr.Message, "versioning is not supported")
	_, err = bkt.Update(ctx, storage.BucketAttrsToUpdate{VersioningEnabled: true})
	requireCode(t, err, http.StatusBadRequest)
	require.NoError(t, first.Stop())

	// A bucket removed from the directory while stopped is forgotten.
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "gone")))

	second := start(t, Options{Dir: dir})
	buckets, err := second.Buckets(ctx)
	require.NoError(t, err)
	assert.Equal(t, []BucketInfo{{
		Name:         "kept",
		Labels:       map[string]string{gcs.OwnerLabel: testUID},
		Location:     "EU",
		StorageClass: "STANDARD",
	}}, buckets)
	records, err := os.ReadFile(filepath.Join(dir, metaFile))
	require.NoError(t, err)
	assert.NotContains(t, string(records), `"gone"`)

	client = newClient(t, second)
	r, err := client.Bucket("kept").Object("report.csv").NewReader(ctx)
	require.NoError(t, err)
	content, err := io.ReadAll(r)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	assert.Equal(t, "a,b\n", string(content))
}

func TestDirWithCorruptRecordsFails(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, metaFile), []byte("{"), 0o600))
	_, err := Start(Options{Dir: dir})
	require.Error(t, err)
	assert.Contains(t, err.Error(), metaFile)
}

// newProvider returns the GCS provider configured only by
// STORAGE_EMULATOR_HOST, as `engine dev` runs it.
func newProvider(t *testing.T, e *Emulator) *gcs.Provider {
	t.Helper()
	t.Setenv("STORAGE_EMULATOR_HOST", e.Host())
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
	p, err := gcs.New(context.Background(), gcs.Options{CallTimeout: 10 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	return p
}

// request is the provider request of a bucket owned by uid, with its
// external name recorded.
func request(t *testing.T, p *gcs.Provider, uid string, spec map[string]any) providers.Request {
	t.Helper()
	req := providers.Request{
		Name:  "data",
		Owner: providers.Owner{UID: uid, Namespace: "dev", Name: "app", Kind: "App"},
		Spec:  spec,
	}
	name, settings, err := p.ExternalName(context.Background(), req, 0)
	require.NoError(t, err)
	req.ExternalName = name
	req.Settings = settings
	return req
}

// metageneration reads a bucket's metageneration, which every write raises.
func metageneration(t *testing.T, client *storage.Client, name string) int64 {
	t.Helper()
	attrs, err := client.Bucket(name).Attrs(context.Background())
	require.NoError(t, err)
	return attrs.MetaGeneration
}

// providers/gcs creates a bucket with its ownership label, adopts it on the
// next Apply without writing, corrects it in place and deletes it.
func TestProviderLifecycle(t *testing.T) {
	e := start(t, Options{})
	p := newProvider(t, e)
	client := newClient(t, e)
	ctx := context.Background()
	for name, spec := range map[string]map[string]any{
		"defaults": {"projectID": testProject, "bucketName": "defaults"},
		"every-field": {
			"projectID": testProject, "bucketName": "full", "location": "europe-west4",
			"storageClass": "NEARLINE", "versioning": true, "uniformBucketLevelAccess": false,
			"labels": map[string]any{"team": "data"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			req := request(t, p, testUID, spec)
			obs, err := p.Apply(ctx, req)
			require.NoError(t, err)
			assert.True(t, obs.Exists)
			assert.Equal(t, req.ExternalName, obs.State["name"])
			buckets, err := e.Buckets(ctx)
			require.NoError(t, err)
			require.Len(t, buckets, 1)
			assert.Equal(t, req.ExternalName, buckets[0].Name)
			assert.Equal(t, testUID, buckets[0].Labels[gcs.OwnerLabel])
			gen := metageneration(t, client, req.ExternalName)

			// Apply again: adopted, nothing to correct, no write.
			again, err := p.Apply(ctx, req)
			require.NoError(t, err)
			assert.Equal(t, obs.State, again.State)
			assert.Equal(t, gen, metageneration(t, client, req.ExternalName), "a second Apply makes no write")

			// A changed label is corrected in place, once.
			req.Spec["labels"] = map[string]any{"team": "platform"}
			changed, err := p.Apply(ctx, req)
			require.NoError(t, err)
			assert.Equal(t, "platform", changed.State["labels"].(map[string]any)["team"])
			assert.Equal(t, gen+1, metageneration(t, client, req.ExternalName))
			_, err = p.Apply(ctx, req)
			require.NoError(t, err)
			assert.Equal(t, gen+1, metageneration(t, client, req.ExternalName))

			obs, err = p.Observe(ctx, req)
			require.NoError(t, err)
			assert.True(t, obs.Exists)

			require.NoError(t, p.Delete(ctx, req))
			assert.Empty(t, bucketNames(t, e))
			obs, err = p.Observe(ctx, req)
			require.NoError(t, err)
			assert.False(t, obs.Exists)
			require.NoError(t, p.Delete(ctx, req), "deleting a deleted bucket is success")
		})
	}
}

// A bucket another owner holds is never adopted, changed or deleted.
func TestProviderRefusesForeignBucket(t *testing.T) {
	e := start(t, Options{})
	p := newProvider(t, e)
	ctx := context.Background()
	spec := func() map[string]any { return map[string]any{"projectID": testProject, "bucketName": "shared"} }

	theirs := request(t, p, otherUID, spec())
	_, err := p.Apply(ctx, theirs)
	require.NoError(t, err)

	// Our request for the same physical name (as if the names collided).
	ours := request(t, p, testUID, spec())
	ours.ExternalName = theirs.ExternalName
	_, err = p.Apply(ctx, ours)
	requireReason(t, err, providers.ReasonNameConflict)
	requireReason(t, p.Delete(ctx, ours), providers.ReasonNameConflict)

	buckets, err := e.Buckets(ctx)
	require.NoError(t, err)
	require.Len(t, buckets, 1)
	assert.Equal(t, otherUID, buckets[0].Labels[gcs.OwnerLabel], "the foreign bucket is untouched")
}

// With forceDestroy, a bucket holding objects (every generation) is
// emptied and deleted; without it, deletion is refused.
func TestProviderForceDestroy(t *testing.T) {
	e := start(t, Options{})
	p := newProvider(t, e)
	client := newClient(t, e)
	ctx := context.Background()
	req := request(t, p, testUID, map[string]any{"projectID": testProject, "bucketName": "full", "versioning": true})
	_, err := p.Apply(ctx, req)
	require.NoError(t, err)
	for _, content := range []string{"v1", "v2"} {
		w := client.Bucket(req.ExternalName).Object("report.csv").NewWriter(ctx)
		_, err := io.WriteString(w, content)
		require.NoError(t, err)
		require.NoError(t, w.Close())
	}

	requireReason(t, p.Delete(ctx, req), gcs.ReasonBucketNotEmpty)
	req.Spec["forceDestroy"] = true
	require.NoError(t, p.Delete(ctx, req))
	assert.Empty(t, bucketNames(t, e))
}

// requireReason asserts that err is a provider error with the given reason.
func requireReason(t *testing.T, err error, reason string) {
	t.Helper()
	require.Error(t, err)
	var pe *providers.Error
	require.True(t, errors.As(err, &pe), "error %v is not a *providers.Error", err)
	require.Equal(t, reason, pe.Reason, "error: %v", err)
}

// Path-style XML object reads work whatever host name the client used.
func TestXMLReadAnyHostName(t *testing.T) {
	e := start(t, Options{})
	client := newClient(t, e)
	ctx := context.Background()
	bkt := client.Bucket("xml")
	require.NoError(t, bkt.Create(ctx, testProject, nil))
	w := bkt.Object("a/b c.txt").NewWriter(ctx)
	_, err := io.WriteString(w, "hello")
	require.NoError(t, err)
	require.NoError(t, w.Close())

	port := regexp.MustCompile(`:[0-9]+$`).FindString(e.Host())
	for _, host := range []string{"127.0.0.1", "localhost"} {
		resp, err := http.Get("http://" + host + port + "/xml/a%2Fb%20c.txt")
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		assert.Equal(t, http.StatusOK, resp.StatusCode, host)
		assert.Equal(t, "hello", string(body), host)
	}
}

// Client options reach the emulator as well as STORAGE_EMULATOR_HOST does.
func TestGoClientWithEndpointOption(t *testing.T) {
	e := start(t, Options{})
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	ctx := context.Background()
	client, err := storage.NewClient(ctx, option.WithEndpoint(e.URL()+"/storage/v1/"), option.WithoutAuthentication())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, client.Close()) })

	bkt := client.Bucket("by-option")
	require.NoError(t, bkt.Create(ctx, testProject, &storage.BucketAttrs{Labels: map[string]string{"team": "data"}}))
	attrs, err := bkt.Attrs(ctx)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"team": "data"}, attrs.Labels)

	w := bkt.Object("o").NewWriter(ctx)
	_, err = io.WriteString(w, "content")
	require.NoError(t, err)
	require.NoError(t, w.Close())
	r, err := bkt.Object("o").NewReader(ctx)
	require.NoError(t, err)
	content, err := io.ReadAll(r)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	assert.Equal(t, "content", string(content))
}

// A resumable upload (the Go client's writer for data larger than one
// chunk) goes through the front.
func TestResumableUpload(t *testing.T) {
	e := start(t, Options{})
	client := newClient(t, e)
	ctx := context.Background()
	bkt := client.Bucket("uploads")
	require.NoError(t, bkt.Create(ctx, testProject, nil))

	data := strings.Repeat("0123456789abcdef", 40<<10) // 640 KiB
	w := bkt.Object("big").NewWriter(ctx)
	w.ChunkSize = 256 << 10
	_, err := io.WriteString(w, data)
	require.NoError(t, err)
	require.NoError(t, w.Close())

	r, err := bkt.Object("big").NewReader(ctx)
	require.NoError(t, err)
	content, err := io.ReadAll(r)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	assert.Equal(t, len(data), len(content))
	assert.Equal(t, data, string(content))
}
