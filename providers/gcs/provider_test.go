package gcs

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"

	"github.com/cuengine/engine/providers"
)

// unitSetup is a fake GCS, a provider talking to it and a named request.
func unitSetup(t *testing.T, s map[string]any) (*fakeGCS, *Provider, providers.Request) {
	t.Helper()
	f := newFakeGCS(t)
	p := newTestProvider(t, f.URL(), 5*time.Second)
	return f, p, namedRequest(t, p, testUID, s, 0)
}

func TestApplyCreatesBucket(t *testing.T) {
	f, p, req := unitSetup(t, spec(map[string]any{
		"labels": map[string]any{"team": "data"}, "versioning": true, "storageClass": "nearline",
	}))
	obs, err := p.Apply(context.Background(), req)
	require.NoError(t, err)

	b := f.bucket(req.ExternalName)
	require.NotNil(t, b)
	assert.Equal(t, "proj-a", b.Project)
	assert.Equal(t, "EU", b.Location)
	assert.Equal(t, "NEARLINE", b.StorageClass)
	assert.True(t, b.Versioning)
	assert.True(t, b.UBLA)
	assert.Equal(t, map[string]string{"team": "data", OwnerLabel: testUID}, b.Labels)

	assert.True(t, obs.Exists)
	assert.True(t, obs.Ready)
	assert.Equal(t, req.ExternalName, obs.State["name"])
	assert.Equal(t, "gs://"+req.ExternalName, obs.State["url"])
	assert.Equal(t, "EU", obs.State["location"])
	assert.Equal(t, "NEARLINE", obs.State["storageClass"])
	assert.Equal(t, "proj-a", obs.State["projectID"])
	assert.Equal(t, true, obs.State["versioning"])
	assert.Equal(t, map[string]any{"team": "data", OwnerLabel: testUID}, obs.State["labels"])
	assert.NotEmpty(t, obs.State["created"])
	assert.Equal(t, []string{req.ExternalName}, f.bucketNames())
}

func TestObserve(t *testing.T) {
	f, p, req := unitSetup(t, spec(nil))
	ctx := context.Background()

	obs, err := p.Observe(ctx, req)
	require.NoError(t, err)
	assert.False(t, obs.Exists)
	assert.False(t, obs.Ready)
	assert.Equal(t, "gs://"+req.ExternalName, obs.State["url"])

	_, err = p.Apply(ctx, req)
	require.NoError(t, err)
	obs, err = p.Observe(ctx, req)
	require.NoError(t, err)
	assert.True(t, obs.Exists)
	assert.True(t, obs.Ready)
	assert.Equal(t, req.ExternalName, obs.State["name"])

	f.addBucket(fakeBucket{Name: "data-ffffffff", Project: "other", Location: "US", Labels: map[string]string{OwnerLabel: "someone-else"}})
	foreign := req
	foreign.ExternalName = "data-ffffffff"
	_, err = p.Observe(ctx, foreign)
	pe := requireReason(t, err, providers.ReasonNameConflict, false)
	assert.Contains(t, pe.Error(), OwnerLabel+"=someone-else")
}

// loseFirstCreateResponse makes the fake perform the first bucket insert
// and then answer 503, as if the response was lost on the way back.
func loseFirstCreateResponse(f *fakeGCS) *atomic.Int32 {
	var lost atomic.Int32
	f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodPost || r.URL.Path != "/storage/v1/b" || !lost.CompareAndSwap(0, 1) {
			return false
		}
		f.mu.Lock()
		f.createBucket(httptest.NewRecorder(), r)
		f.mu.Unlock()
		writeError(w, http.StatusServiceUnavailable, "backend error")
		return true
	})
	return &lost
}

func TestApplyAdoptsOwnBucketAfterLostCreateResponse(t *testing.T) {
	f, p, req := unitSetup(t, spec(nil))
	lost := loseFirstCreateResponse(f)

	obs, err := p.Apply(context.Background(), req)
	require.NoError(t, err)
	assert.EqualValues(t, 1, lost.Load(), "the create response was not lost: the test did not exercise the retry")
	assert.True(t, obs.Exists)
	assert.Equal(t, []string{req.ExternalName}, f.bucketNames(), "exactly one bucket")

	var posts int
	for _, w := range f.writes() {
		if w.Method == http.MethodPost {
			posts++
		}
	}
	assert.Equal(t, 2, posts, "the client retried the create and got 409")
}

func TestApplyAdoptsWhenClientDoesNotRetryCreate(t *testing.T) {
	f := newFakeGCS(t)
	p, err := New(context.Background(), Options{
		CallTimeout:   5 * time.Second,
		ClientOptions: []option.ClientOption{option.WithEndpoint(f.URL() + "/storage/v1/"), option.WithoutAuthentication()},
		RetryOptions:  []storage.RetryOption{storage.WithPolicy(storage.RetryNever)},
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	req := namedRequest(t, p, testUID, spec(nil), 0)
	loseFirstCreateResponse(f)

	_, err = p.Apply(context.Background(), req)
	requireReason(t, err, providers.ReasonUnavailable, true)

	obs, err := p.Apply(context.Background(), req)
	require.NoError(t, err)
	assert.True(t, obs.Exists)
	assert.Equal(t, []string{req.ExternalName}, f.bucketNames(), "exactly one bucket")
}

func TestApplyForeignBucketIsNameConflictAndUntouched(t *testing.T) {
	tests := []struct {
		name   string
		bucket fakeBucket
		// hideFirstRead makes the first GET answer 404, so the provider
		// meets the foreign bucket as a 409 on create.
		hideFirstRead bool
	}{
		{name: "readable, other owner", bucket: fakeBucket{Project: "other", Location: "EU", Labels: map[string]string{OwnerLabel: "other-uid", "team": "x"}}},
		{name: "readable, no label", bucket: fakeBucket{Project: "other", Location: "EU"}},
		{name: "created concurrently, 409 on create", bucket: fakeBucket{Project: "other", Location: "EU", Labels: map[string]string{"team": "x"}}, hideFirstRead: true},
		{name: "unreadable project, 409 on create", bucket: fakeBucket{Project: "other", Location: "EU", Unreadable: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, p, req := unitSetup(t, spec(map[string]any{"labels": map[string]any{"team": "mine"}}))
			tc.bucket.Name = req.ExternalName
			f.addBucket(tc.bucket)
			before := f.bucket(req.ExternalName)
			if tc.hideFirstRead {
				var hidden atomic.Bool
				f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
					if r.Method == http.MethodGet && hidden.CompareAndSwap(false, true) {
						writeError(w, http.StatusNotFound, "not found")
						return true
					}
					return false
				})
			}

			_, err := p.Apply(context.Background(), req)
			pe := requireReason(t, err, providers.ReasonNameConflict, false)
			assert.Contains(t, pe.Error(), req.ExternalName)

			assert.Equal(t, before, f.bucket(req.ExternalName), "the foreign bucket must be untouched")
			for _, w := range f.writes() {
				assert.NotEqual(t, http.MethodPatch, w.Method, "no update of a foreign bucket")
				assert.NotEqual(t, http.MethodDelete, w.Method, "no delete of a foreign bucket")
			}
		})
	}
}

func TestApplyNameConflictThenNextAttemptCreates(t *testing.T) {
	f, p, req := unitSetup(t, spec(nil))
	f.addBucket(fakeBucket{Name: req.ExternalName, Project: "other", Location: "EU"})
	_, err := p.Apply(context.Background(), req)
	requireReason(t, err, providers.ReasonNameConflict, false)

	next := namedRequest(t, p, testUID, spec(nil), 1)
	require.NotEqual(t, req.ExternalName, next.ExternalName)
	_, err = p.Apply(context.Background(), next)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{req.ExternalName, next.ExternalName}, f.bucketNames())
	assert.Empty(t, f.bucket(req.ExternalName).Labels, "the foreign bucket keeps its labels")
}

func TestApplyImmutableFields(t *testing.T) {
	tests := []struct {
		name     string
		change   func(req *providers.Request)
		field    string
		old, new string
		// afterCreate: the change is checked against the existing bucket
		// (location); otherwise against what was recorded, before any call.
		afterCreate bool
	}{
		{
			name: "location", field: "location", old: "EU", new: "US", afterCreate: true,
			change: func(req *providers.Request) { req.Spec["location"] = "us" },
		},
		{
			name: "logical bucket name", field: "bucketName", old: "data", new: "logs",
			change: func(req *providers.Request) { req.Spec["bucketName"] = "logs" },
		},
		{
			name: "project", field: "projectID", old: "proj-a", new: "proj-b",
			change: func(req *providers.Request) { req.Spec["projectID"] = "proj-b" },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, p, req := unitSetup(t, spec(nil))
			if tc.afterCreate {
				_, err := p.Apply(context.Background(), req)
				require.NoError(t, err)
			}
			f.resetRequests()
			tc.change(&req)

			_, err := p.Apply(context.Background(), req)
			pe := requireReason(t, err, providers.ReasonImmutableField, false)
			assert.Contains(t, pe.Error(), "spec."+tc.field)
			assert.Contains(t, pe.Error(), `"`+tc.old+`"`)
			assert.Contains(t, pe.Error(), `"`+tc.new+`"`)
			assert.Empty(t, f.writes(), "no write, never a second bucket")
			if !tc.afterCreate {
				assert.Zero(t, f.requestCount(), "checked before any call")
			}
		})
	}
}

func TestApplyCorrectsDriftWithOneUpdateThenNoWrite(t *testing.T) {
	f, p, req := unitSetup(t, spec(map[string]any{"labels": map[string]any{"team": "data", "env": "prod"}}))
	ctx := context.Background()
	_, err := p.Apply(ctx, req)
	require.NoError(t, err)

	// Someone edits the bucket by hand.
	f.mu.Lock()
	b := f.buckets[req.ExternalName]
	b.Labels["team"] = "hijacked"
	delete(b.Labels, "env")
	b.Labels["extra"] = "x"
	b.Labels["goog-managed"] = "keep"
	b.Versioning = true
	b.StorageClass = "COLDLINE"
	b.Metageneration = 7
	f.mu.Unlock()
	f.resetRequests()

	obs, err := p.Apply(ctx, req)
	require.NoError(t, err)
	writes := f.writes()
	require.Len(t, writes, 1, "one update: %v", writes)
	assert.Equal(t, http.MethodPatch, writes[0].Method)
	assert.Equal(t, "7", writes[0].Query.Get("ifMetagenerationMatch"), "guarded by the metageneration read")

	got := f.bucket(req.ExternalName)
	assert.Equal(t, map[string]string{"team": "data", "env": "prod", OwnerLabel: testUID, "goog-managed": "keep"}, got.Labels)
	assert.False(t, got.Versioning)
	assert.Equal(t, "STANDARD", got.StorageClass)
	assert.Equal(t, got.Labels["team"], obs.State["labels"].(map[string]any)["team"])

	f.resetRequests()
	_, err = p.Apply(ctx, req)
	require.NoError(t, err)
	assert.Empty(t, f.writes(), "a matching bucket gets no write")
}

func TestApplySpecChangeUpdatesMutableFields(t *testing.T) {
	f, p, req := unitSetup(t, spec(nil))
	ctx := context.Background()
	_, err := p.Apply(ctx, req)
	require.NoError(t, err)

	req.Spec["versioning"] = true
	req.Spec["uniformBucketLevelAccess"] = false
	req.Spec["labels"] = map[string]any{"cost-center": "42"}
	_, err = p.Apply(ctx, req)
	require.NoError(t, err)
	b := f.bucket(req.ExternalName)
	assert.True(t, b.Versioning)
	assert.False(t, b.UBLA)
	assert.Equal(t, map[string]string{"cost-center": "42", OwnerLabel: testUID}, b.Labels)
}

func TestApplyConcurrentChangeIsRetryable(t *testing.T) {
	f, p, req := unitSetup(t, spec(nil))
	ctx := context.Background()
	_, err := p.Apply(ctx, req)
	require.NoError(t, err)

	f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPatch {
			f.mu.Lock()
			f.buckets[req.ExternalName].Metageneration++ // someone else wrote first
			f.mu.Unlock()
		}
		return false
	})
	req.Spec["versioning"] = true
	_, err = p.Apply(ctx, req)
	requireReason(t, err, providers.ReasonProviderError, true)
	assert.False(t, f.bucket(req.ExternalName).Versioning, "no blind overwrite")
}

func TestDelete(t *testing.T) {
	t.Run("absent bucket is success", func(t *testing.T) {
		_, p, req := unitSetup(t, spec(nil))
		require.NoError(t, p.Delete(context.Background(), req))
	})

	t.Run("works from external name and settings alone", func(t *testing.T) {
		f, p, req := unitSetup(t, spec(nil))
		_, err := p.Apply(context.Background(), req)
		require.NoError(t, err)
		req.Spec = nil
		require.NoError(t, p.Delete(context.Background(), req))
		assert.Empty(t, f.bucketNames())
		require.NoError(t, p.Delete(context.Background(), req), "deleting again is success")
	})

	t.Run("404 from the bucket delete is success", func(t *testing.T) {
		f, p, req := unitSetup(t, spec(nil))
		_, err := p.Apply(context.Background(), req)
		require.NoError(t, err)
		f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method == http.MethodDelete {
				writeError(w, http.StatusNotFound, "The specified bucket does not exist.")
				return true
			}
			return false
		})
		require.NoError(t, p.Delete(context.Background(), req))
	})

	t.Run("non-empty bucket without forceDestroy", func(t *testing.T) {
		f, p, req := unitSetup(t, spec(nil))
		_, err := p.Apply(context.Background(), req)
		require.NoError(t, err)
		f.addObject(req.ExternalName, "report.csv")

		err = p.Delete(context.Background(), req)
		pe := requireReason(t, err, ReasonBucketNotEmpty, false)
		assert.Contains(t, pe.Error(), "forceDestroy")
		assert.Contains(t, pe.Error(), `deletionPolicy: "Orphan"`)
		b := f.bucket(req.ExternalName)
		require.NotNil(t, b)
		assert.Len(t, b.Objects, 1)
	})

	t.Run("noncurrent generations alone block deletion", func(t *testing.T) {
		f, p, req := unitSetup(t, spec(map[string]any{"versioning": true}))
		_, err := p.Apply(context.Background(), req)
		require.NoError(t, err)
		f.addObject(req.ExternalName, "a")
		f.mu.Lock()
		f.buckets[req.ExternalName].Objects[0].Live = false // deleted, kept as noncurrent
		f.mu.Unlock()
		requireReason(t, p.Delete(context.Background(), req), ReasonBucketNotEmpty, false)
	})

	t.Run("objects appearing between check and delete", func(t *testing.T) {
		f, p, req := unitSetup(t, spec(nil))
		_, err := p.Apply(context.Background(), req)
		require.NoError(t, err)
		f.addObject(req.ExternalName, "late")
		f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method == http.MethodGet && objectsURL.MatchString(r.URL.Path) {
				writeJSON(w, http.StatusOK, map[string]any{"kind": "storage#objects"})
				return true
			}
			return false
		})
		requireReason(t, p.Delete(context.Background(), req), ReasonBucketNotEmpty, false)
		assert.NotNil(t, f.bucket(req.ExternalName))
	})

	t.Run("forceDestroy deletes every generation then the bucket", func(t *testing.T) {
		old := objectPageSize
		objectPageSize = 2
		t.Cleanup(func() { objectPageSize = old })

		f, p, req := unitSetup(t, spec(map[string]any{"versioning": true, "forceDestroy": true}))
		_, err := p.Apply(context.Background(), req)
		require.NoError(t, err)
		for range 3 {
			f.addObject(req.ExternalName, "a")
		}
		f.addObject(req.ExternalName, "b")
		f.addObject(req.ExternalName, "c/d")
		want := map[string]bool{}
		for _, o := range f.bucket(req.ExternalName).Objects {
			want[o.Name+"#"+itoa(o.Generation)] = true
		}
		require.Len(t, want, 5)
		f.resetRequests()

		require.NoError(t, p.Delete(context.Background(), req))
		assert.Empty(t, f.bucketNames())
		deleted := map[string]bool{}
		for _, w := range f.writes() {
			if m := objectPath.FindStringSubmatch(w.Path); m != nil {
				deleted[unescape(m[2])+"#"+w.Query.Get("generation")] = true
			}
		}
		assert.Equal(t, want, deleted, "every generation deleted by number")
	})

	t.Run("foreign bucket is never deleted", func(t *testing.T) {
		f, p, req := unitSetup(t, spec(map[string]any{"forceDestroy": true}))
		f.addBucket(fakeBucket{Name: req.ExternalName, Project: "other", Location: "EU", Labels: map[string]string{OwnerLabel: "other"}})
		f.addObject(req.ExternalName, "theirs")
		before := f.bucket(req.ExternalName)

		requireReason(t, p.Delete(context.Background(), req), providers.ReasonNameConflict, false)
		assert.Equal(t, before, f.bucket(req.ExternalName))
		assert.Empty(t, f.writes())
	})

	t.Run("unreadable bucket is never deleted", func(t *testing.T) {
		f, p, req := unitSetup(t, spec(nil))
		f.addBucket(fakeBucket{Name: req.ExternalName, Project: "other", Location: "EU", Unreadable: true})
		requireReason(t, p.Delete(context.Background(), req), providers.ReasonCredentialsError, false)
		assert.NotNil(t, f.bucket(req.ExternalName))
		assert.Empty(t, f.writes())
	})
}

func TestRegister(t *testing.T) {
	p := newOfflineProvider(t)
	r := providers.NewRegistry()
	Register(r, p)
	got, ok := r.Get(Name)
	require.True(t, ok)
	assert.Same(t, p, got)
	assert.Equal(t, []string{"gcs"}, r.Names())
}

func TestPerCallDeadline(t *testing.T) {
	f := newFakeGCS(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		select {
		case <-r.Context().Done():
		case <-release:
		}
		return true
	})
	p := newTestProvider(t, f.URL(), 100*time.Millisecond)
	req := namedRequest(t, p, testUID, spec(nil), 0)

	start := time.Now()
	_, err := p.Observe(context.Background(), req)
	pe := requireReason(t, err, providers.ReasonTimeout, true)
	assert.Contains(t, pe.Error(), "per-call timeout of 100ms")
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestApplyRejectsBeforeAnyCall(t *testing.T) {
	tests := []struct {
		name   string
		change func(req *providers.Request)
		reason string
	}{
		{"no external name", func(req *providers.Request) { req.ExternalName = "" }, providers.ReasonInvalidName},
		{"invalid recorded name", func(req *providers.Request) { req.ExternalName = "Data-1" }, providers.ReasonInvalidName},
		{"invalid spec", func(req *providers.Request) { req.Spec["versioning"] = "yes" }, providers.ReasonInvalidSpec},
		{"no owner", func(req *providers.Request) { req.Owner.UID = "" }, providers.ReasonProviderError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, p, req := unitSetup(t, spec(nil))
			tc.change(&req)
			_, err := p.Apply(context.Background(), req)
			requireReason(t, err, tc.reason, false)
			assert.Zero(t, f.requestCount())
		})
	}
}

func TestApplyConflictThenGoneIsRetryable(t *testing.T) {
	f, p, req := unitSetup(t, spec(nil))
	f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPost {
			writeError(w, http.StatusConflict, "exists")
			return true
		}
		return false
	})
	_, err := p.Apply(context.Background(), req)
	requireReason(t, err, providers.ReasonProviderError, true)
	assert.Empty(t, f.bucketNames())
}

func TestForceDestroyFailures(t *testing.T) {
	t.Run("object that cannot be deleted", func(t *testing.T) {
		f, p, req := unitSetup(t, spec(map[string]any{"forceDestroy": true}))
		_, err := p.Apply(context.Background(), req)
		require.NoError(t, err)
		f.addObject(req.ExternalName, "held")
		f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method == http.MethodDelete && objectPath.MatchString(r.URL.Path) {
				writeError(w, http.StatusForbidden, "Object is subject to bucket's retention policy")
				return true
			}
			return false
		})
		pe := requireReason(t, p.Delete(context.Background(), req), providers.ReasonProviderError, false)
		assert.Contains(t, pe.Error(), "retention policy")
		assert.NotNil(t, f.bucket(req.ExternalName))
	})

	t.Run("objects written during deletion", func(t *testing.T) {
		f, p, req := unitSetup(t, spec(map[string]any{"forceDestroy": true}))
		_, err := p.Apply(context.Background(), req)
		require.NoError(t, err)
		var wrote atomic.Bool
		f.setHook(func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method == http.MethodDelete && bucketPath.MatchString(r.URL.Path) && wrote.CompareAndSwap(false, true) {
				f.addObject(req.ExternalName, "late")
			}
			return false
		})
		requireReason(t, p.Delete(context.Background(), req), providers.ReasonProviderError, true)
		require.NotNil(t, f.bucket(req.ExternalName))

		require.NoError(t, p.Delete(context.Background(), req), "the next attempt empties and deletes it")
		assert.Empty(t, f.bucketNames())
	})
}
