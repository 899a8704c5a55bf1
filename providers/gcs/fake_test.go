package gcs

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	raw "google.golang.org/api/storage/v1"
)

// fakeGCS is a small in-memory model of the GCS JSON API, enough for the
// provider: buckets with projects, labels, versioning, storage class, UBLA
// and metagenerations; object generations; 409 on an existing name and on
// deleting a non-empty bucket; 412 on a failed metageneration precondition;
// 403 on reading a bucket of a project the caller cannot see. It models what
// fake-gcs-server lacks (labels, projects, preconditions).
type fakeGCS struct {
	mu       sync.Mutex
	buckets  map[string]*fakeBucket
	nextGen  int64
	requests []fakeRequest // every request, in order
	// hook, when set, sees every request first; returning true means it
	// answered the request itself.
	hook func(w http.ResponseWriter, r *http.Request) bool
	srv  *httptest.Server
}

// fakeBucket is one bucket of the fake.
type fakeBucket struct {
	Name           string
	Project        string
	Location       string
	StorageClass   string
	Labels         map[string]string
	Versioning     bool
	UBLA           bool
	Metageneration int64
	Created        time.Time
	// Unreadable buckets answer 403 to reads: they live in a project the
	// caller has no access to.
	Unreadable bool
	Objects    []fakeObject
}

// fakeRequest is one request the fake received.
type fakeRequest struct {
	Method string
	Path   string
	Query  url.Values
}

// String is "METHOD /path".
func (r fakeRequest) String() string { return r.Method + " " + r.Path }

// fakeObject is one generation of an object.
type fakeObject struct {
	Name       string
	Generation int64
	Live       bool
}

var (
	bucketPath = regexp.MustCompile(`^/storage/v1/b/([^/]+)$`)
	objectsURL = regexp.MustCompile(`^/storage/v1/b/([^/]+)/o$`)
	objectPath = regexp.MustCompile(`^/storage/v1/b/([^/]+)/o/(.+)$`)
)

// newFakeGCS starts the fake on a loopback port; it stops with the test.
func newFakeGCS(t *testing.T) *fakeGCS {
	t.Helper()
	f := &fakeGCS{buckets: map[string]*fakeBucket{}, nextGen: 1000}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// URL is the base URL of the fake.
func (f *fakeGCS) URL() string { return f.srv.URL }

// setHook installs a request interceptor.
func (f *fakeGCS) setHook(h func(w http.ResponseWriter, r *http.Request) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hook = h
}

// addBucket seeds a bucket, as if created by someone else or earlier.
func (f *fakeGCS) addBucket(b fakeBucket) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b.Metageneration == 0 {
		b.Metageneration = 1
	}
	if b.Labels == nil {
		b.Labels = map[string]string{}
	}
	if b.Created.IsZero() {
		b.Created = time.Now().UTC()
	}
	f.buckets[b.Name] = &b
}

// addObject writes a new generation of an object. In a versioned bucket the
// previous live generation becomes noncurrent; otherwise it is replaced.
func (f *fakeGCS) addObject(bucket, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.buckets[bucket]
	kept := b.Objects[:0]
	for _, o := range b.Objects {
		if o.Name == name && o.Live {
			if !b.Versioning {
				continue
			}
			o.Live = false
		}
		kept = append(kept, o)
	}
	f.nextGen++
	b.Objects = append(kept, fakeObject{Name: name, Generation: f.nextGen, Live: true})
}

// bucket returns a copy of a bucket, or nil.
func (f *fakeGCS) bucket(name string) *fakeBucket {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.buckets[name]
	if !ok {
		return nil
	}
	c := *b
	c.Labels = copyLabels(b.Labels)
	c.Objects = append([]fakeObject(nil), b.Objects...)
	return &c
}

// bucketNames lists the buckets, sorted.
func (f *fakeGCS) bucketNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	for n := range f.buckets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// writes returns the requests that could change state (all but GET).
func (f *fakeGCS) writes() []fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeRequest
	for _, r := range f.requests {
		if r.Method != http.MethodGet {
			out = append(out, r)
		}
	}
	return out
}

// requestCount is the number of requests received.
func (f *fakeGCS) requestCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

// resetRequests forgets the requests seen so far.
func (f *fakeGCS) resetRequests() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = nil
}

func (f *fakeGCS) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests = append(f.requests, fakeRequest{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query()})
	hook := f.hook
	f.mu.Unlock()
	if hook != nil && hook(w, r) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	path := r.URL.EscapedPath()
	switch {
	case path == "/storage/v1/b" && r.Method == http.MethodPost:
		f.createBucket(w, r)
	case bucketPath.MatchString(path):
		f.bucketOp(w, r, unescape(bucketPath.FindStringSubmatch(path)[1]))
	case objectsURL.MatchString(path) && r.Method == http.MethodGet:
		f.listObjects(w, r, unescape(objectsURL.FindStringSubmatch(path)[1]))
	case objectPath.MatchString(path) && r.Method == http.MethodDelete:
		m := objectPath.FindStringSubmatch(path)
		f.deleteObject(w, r, unescape(m[1]), unescape(m[2]))
	default:
		writeError(w, http.StatusNotFound, "no such route: "+r.Method+" "+path)
	}
}

func (f *fakeGCS) bucketOp(w http.ResponseWriter, r *http.Request, name string) {
	switch r.Method {
	case http.MethodGet:
		f.getBucket(w, name)
	case http.MethodPatch:
		f.patchBucket(w, r, name)
	case http.MethodDelete:
		f.deleteBucket(w, r, name)
	default:
		writeError(w, http.StatusMethodNotAllowed, r.Method)
	}
}

func (f *fakeGCS) createBucket(w http.ResponseWriter, r *http.Request) {
	project := r.URL.Query().Get("project")
	if project == "" {
		writeError(w, http.StatusBadRequest, "Required parameter: project")
		return
	}
	var in raw.Bucket
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if checkBucketName(in.Name) != nil {
		writeError(w, http.StatusBadRequest, "Invalid bucket name: '"+in.Name+"'")
		return
	}
	if _, ok := f.buckets[in.Name]; ok {
		writeError(w, http.StatusConflict, "Your previous request to create the named bucket succeeded and you already own it.")
		return
	}
	b := &fakeBucket{
		Name:           in.Name,
		Project:        project,
		Location:       strings.ToUpper(orDefault(in.Location, "US")),
		StorageClass:   strings.ToUpper(orDefault(in.StorageClass, "STANDARD")),
		Labels:         copyLabels(in.Labels),
		Versioning:     in.Versioning != nil && in.Versioning.Enabled,
		UBLA:           in.IamConfiguration != nil && in.IamConfiguration.UniformBucketLevelAccess != nil && in.IamConfiguration.UniformBucketLevelAccess.Enabled,
		Metageneration: 1,
		Created:        time.Now().UTC(),
	}
	f.buckets[b.Name] = b
	writeJSON(w, http.StatusOK, b.toRaw())
}

func (f *fakeGCS) getBucket(w http.ResponseWriter, name string) {
	b, ok := f.readable(w, name)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, b.toRaw())
}

// readable returns the bucket, or answers 404/403 and false.
func (f *fakeGCS) readable(w http.ResponseWriter, name string) (*fakeBucket, bool) {
	b, ok := f.buckets[name]
	if !ok {
		writeError(w, http.StatusNotFound, "The specified bucket does not exist.")
		return nil, false
	}
	if b.Unreadable {
		writeError(w, http.StatusForbidden, "caller does not have storage.buckets.get access to the Google Cloud Storage bucket.")
		return nil, false
	}
	return b, true
}

// preconditionOK checks ifMetagenerationMatch, answering 412 when it fails.
func preconditionOK(w http.ResponseWriter, r *http.Request, b *fakeBucket) bool {
	v := r.URL.Query().Get("ifMetagenerationMatch")
	if v == "" {
		return true
	}
	want, err := strconv.ParseInt(v, 10, 64)
	if err != nil || want != b.Metageneration {
		writeError(w, http.StatusPreconditionFailed, "At least one of the pre-conditions you specified did not hold.")
		return false
	}
	return true
}

// bucketPatch is a PATCH body: labels with null values are deletions.
type bucketPatch struct {
	Labels       map[string]*string `json:"labels"`
	StorageClass string             `json:"storageClass"`
	Versioning   *struct {
		Enabled bool `json:"enabled"`
	} `json:"versioning"`
	IamConfiguration *struct {
		UniformBucketLevelAccess *struct {
			Enabled bool `json:"enabled"`
		} `json:"uniformBucketLevelAccess"`
	} `json:"iamConfiguration"`
}

func (f *fakeGCS) patchBucket(w http.ResponseWriter, r *http.Request, name string) {
	b, ok := f.readable(w, name)
	if !ok || !preconditionOK(w, r, b) {
		return
	}
	var in bucketPatch
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	for k, v := range in.Labels {
		if v == nil {
			delete(b.Labels, k)
		} else {
			b.Labels[k] = *v
		}
	}
	if in.StorageClass != "" {
		b.StorageClass = strings.ToUpper(in.StorageClass)
	}
	if in.Versioning != nil {
		b.Versioning = in.Versioning.Enabled
	}
	if in.IamConfiguration != nil && in.IamConfiguration.UniformBucketLevelAccess != nil {
		b.UBLA = in.IamConfiguration.UniformBucketLevelAccess.Enabled
	}
	b.Metageneration++
	writeJSON(w, http.StatusOK, b.toRaw())
}

func (f *fakeGCS) deleteBucket(w http.ResponseWriter, r *http.Request, name string) {
	b, ok := f.readable(w, name)
	if !ok || !preconditionOK(w, r, b) {
		return
	}
	if len(b.Objects) > 0 {
		writeError(w, http.StatusConflict, "The bucket you tried to delete is not empty.")
		return
	}
	delete(f.buckets, name)
	w.WriteHeader(http.StatusNoContent)
}

func (f *fakeGCS) listObjects(w http.ResponseWriter, r *http.Request, name string) {
	b, ok := f.readable(w, name)
	if !ok {
		return
	}
	q := r.URL.Query()
	var all []fakeObject
	for _, o := range b.Objects {
		if o.Live || q.Get("versions") == "true" {
			all = append(all, o)
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].Name != all[j].Name {
			return all[i].Name < all[j].Name
		}
		return all[i].Generation < all[j].Generation
	})
	start, _ := strconv.Atoi(q.Get("pageToken"))
	size, err := strconv.Atoi(q.Get("maxResults"))
	if err != nil || size <= 0 {
		size = 1000
	}
	out := &raw.Objects{Kind: "storage#objects", Items: []*raw.Object{}}
	for i := start; i < len(all) && i < start+size; i++ {
		out.Items = append(out.Items, &raw.Object{Bucket: name, Name: all[i].Name, Generation: all[i].Generation})
	}
	if start+size < len(all) {
		out.NextPageToken = strconv.Itoa(start + size)
	}
	writeJSON(w, http.StatusOK, out)
}

func (f *fakeGCS) deleteObject(w http.ResponseWriter, r *http.Request, bucket, object string) {
	b, ok := f.readable(w, bucket)
	if !ok {
		return
	}
	gen, _ := strconv.ParseInt(r.URL.Query().Get("generation"), 10, 64)
	for i, o := range b.Objects {
		if o.Name == object && (o.Generation == gen || (gen == 0 && o.Live)) {
			b.Objects = append(b.Objects[:i], b.Objects[i+1:]...)
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	writeError(w, http.StatusNotFound, "No such object: "+bucket+"/"+object)
}

// toRaw is the JSON API representation of the bucket.
func (b *fakeBucket) toRaw() *raw.Bucket {
	return &raw.Bucket{
		Kind:           "storage#bucket",
		Id:             b.Name,
		Name:           b.Name,
		Location:       b.Location,
		StorageClass:   b.StorageClass,
		Labels:         copyLabels(b.Labels),
		Versioning:     &raw.BucketVersioning{Enabled: b.Versioning},
		Metageneration: b.Metageneration,
		ProjectNumber:  projectNumber(b.Project),
		TimeCreated:    b.Created.Format(time.RFC3339Nano),
		SelfLink:       "https://www.googleapis.com/storage/v1/b/" + b.Name,
		IamConfiguration: &raw.BucketIamConfiguration{
			UniformBucketLevelAccess: &raw.BucketIamConfigurationUniformBucketLevelAccess{Enabled: b.UBLA},
		},
	}
}

// projectNumber derives a stable fake project number from a project ID.
func projectNumber(project string) uint64 {
	var n uint64 = 100000
	for _, c := range project {
		n = n*31 + uint64(c)
	}
	return n % 1_000_000_000_000
}

func copyLabels(in map[string]string) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func unescape(s string) string {
	out, err := url.PathUnescape(s)
	if err != nil {
		return s
	}
	return out
}

// writeJSON answers with a JSON body.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers with a JSON API error body.
func writeError(w http.ResponseWriter, code int, msg string) {
	body := map[string]any{"error": map[string]any{
		"code":    code,
		"message": msg,
		"errors":  []map[string]any{{"message": msg, "reason": reasonFor(code)}},
	}}
	writeJSON(w, code, body)
}

func reasonFor(code int) string {
	switch code {
	case http.StatusConflict:
		return "conflict"
	case http.StatusPreconditionFailed:
		return "conditionNotMet"
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusNotFound:
		return "notFound"
	default:
		return fmt.Sprintf("http%d", code)
	}
}
