package gcsemulator

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/fsouza/fake-gcs-server/fakestorage"
)

// maxBucketBody bounds the body of a bucket insert or patch the front reads.
const maxBucketBody = 1 << 20

// Paths of the JSON API's bucket collection and of fake-gcs-server's
// endpoints.
const (
	bucketsPath     = "/storage/v1/b"
	bucketPrefix    = bucketsPath + "/"
	downloadPrefix  = "/download/storage/v1/b/"
	internalPrefix  = "/_internal/"
	healthcheckPath = internalPrefix + "healthcheck"
)

// reservedPrefixes are the paths that are not path-style XML object reads.
var reservedPrefixes = []string{
	"/storage/v1/", "/upload/storage/v1/", "/download/storage/v1/", "/batch/storage/v1", internalPrefix,
}

// front is the HTTP handler in front of fake-gcs-server. It answers bucket
// resources itself, with what it keeps in meta, and passes every other
// request through.
type front struct {
	fake    *fakestorage.Server
	handler http.Handler
	// noVersioning is set with the filesystem backend, which cannot keep
	// object versions.
	noVersioning bool

	// mu serializes bucket requests, so that a precondition check, the
	// change in fake-gcs-server and the change of the record are one step.
	mu   sync.Mutex
	meta *metaStore
}

// newFront returns the front of fake, with the bucket records in meta.
func newFront(fake *fakestorage.Server, meta *metaStore, noVersioning bool) *front {
	return &front{fake: fake, handler: fake.HTTPHandler(), meta: meta, noVersioning: noVersioning}
}

// forget drops the records of buckets fake-gcs-server no longer has (a
// storage directory edited while the emulator was stopped).
func (f *front) forget() error {
	buckets, err := f.fake.Backend().ListBuckets()
	if err != nil {
		return fmt.Errorf("listing buckets: %w", err)
	}
	exists := make(map[string]bool, len(buckets))
	for _, b := range buckets {
		exists[b.Name] = true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.meta.retain(func(name string) bool { return exists[name] })
}

// bucketExists reports whether fake-gcs-server has bucket name, and its
// versioning and event-based-hold flags.
func (f *front) bucketExists(name string) (exists, versioning, eventBasedHold bool) {
	b, err := f.fake.Backend().GetBucket(name)
	if err != nil {
		return false, false, false
	}
	return true, b.VersioningEnabled, b.DefaultEventBasedHold
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.EscapedPath()
	switch {
	case path == bucketsPath || path == bucketPrefix:
		switch r.Method {
		case http.MethodGet:
			f.listBuckets(w, r)
		case http.MethodPost:
			f.insertBucket(w, r)
		default:
			f.handler.ServeHTTP(w, r)
		}
	case strings.HasPrefix(path, bucketPrefix) && !strings.Contains(path[len(bucketPrefix):], "/"):
		name, err := url.PathUnescape(path[len(bucketPrefix):])
		if err != nil || !bucketName.MatchString(name) {
			writeError(w, http.StatusBadRequest, "Invalid bucket name: '"+path[len(bucketPrefix):]+"'")
			return
		}
		switch {
		case r.Method == http.MethodGet:
			f.getBucket(w, r, name)
		case r.Method == http.MethodPatch,
			r.Method == http.MethodPost && r.Header.Get("X-HTTP-Method-Override") == http.MethodPatch:
			f.patchBucket(w, r, name)
		case r.Method == http.MethodDelete:
			f.deleteBucket(w, r, name)
		default:
			f.handler.ServeHTTP(w, r)
		}
	case strings.HasPrefix(path, internalPrefix) && path != healthcheckPath:
		// fake-gcs-server's configuration and reset endpoints would bypass
		// the front's records, and its configuration update is not safe
		// for concurrent use.
		writeError(w, http.StatusNotFound, "fake-gcs-server's internal endpoints are disabled in this emulator")
	default:
		f.handler.ServeHTTP(w, xmlRead(r))
	}
}

// xmlRead rewrites a path-style XML object read (GET or HEAD /BUCKET/OBJECT,
// which the Go client uses for readers) to fake-gcs-server's download path,
// which it serves whatever the Host header; fake-gcs-server routes the XML
// path only for its configured public host. Other requests are returned as
// they are.
func xmlRead(r *http.Request) *http.Request {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return r
	}
	path := r.URL.EscapedPath()
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(path, p) {
			return r
		}
	}
	bucket, object, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if !ok || object == "" || !bucketName.MatchString(bucket) {
		return r
	}
	raw := downloadPrefix + bucket + "/o/" + object
	decoded, err := url.PathUnescape(raw)
	if err != nil {
		return r
	}
	out := r.Clone(r.Context())
	out.URL.Path = decoded
	out.URL.RawPath = raw
	return out
}

// bucketResource is the part of a JSON API bucket resource the front reads
// from inserts and patches.
type bucketResource struct {
	Name                  string             `json:"name"`
	Labels                map[string]*string `json:"labels"`
	Location              string             `json:"location"`
	StorageClass          string             `json:"storageClass"`
	IamConfiguration      *iamConfiguration  `json:"iamConfiguration"`
	Versioning            *versioning        `json:"versioning"`
	DefaultEventBasedHold *bool              `json:"defaultEventBasedHold"`
}

type iamConfiguration struct {
	UniformBucketLevelAccess *enabledFlag `json:"uniformBucketLevelAccess"`
	BucketPolicyOnly         *enabledFlag `json:"bucketPolicyOnly"`
}

type enabledFlag struct {
	Enabled bool `json:"enabled"`
}

type versioning struct {
	Enabled bool `json:"enabled"`
}

// uniformBucketLevelAccess is the setting named by an iamConfiguration, and
// whether it names one. bucketPolicyOnly is its older name.
func (c *iamConfiguration) uniformBucketLevelAccess() (enabled, set bool) {
	switch {
	case c == nil:
		return false, false
	case c.UniformBucketLevelAccess != nil:
		return c.UniformBucketLevelAccess.Enabled, true
	case c.BucketPolicyOnly != nil:
		return c.BucketPolicyOnly.Enabled, true
	default:
		return false, false
	}
}

// insertBucket creates the bucket in fake-gcs-server and records what it
// drops.
func (f *front) insertBucket(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var in bucketResource
	if err := json.Unmarshal(body, &in); err != nil {
		writeError(w, http.StatusBadRequest, "Invalid JSON payload: "+err.Error())
		return
	}
	m := bucketMeta{
		Labels:         map[string]string{},
		Location:       strings.ToUpper(in.Location),
		StorageClass:   strings.ToUpper(in.StorageClass),
		Metageneration: 1,
	}
	for k, v := range in.Labels {
		if v != nil {
			m.Labels[k] = *v
		}
	}
	if m.Location == "" {
		m.Location = defaultLocation
	}
	if m.StorageClass == "" {
		m.StorageClass = defaultStorageClass
	}
	m.UniformBucketLevelAccess, _ = in.IamConfiguration.uniformBucketLevelAccess()
	if err := m.validate(); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if f.noVersioning && in.Versioning != nil && in.Versioning.Enabled {
		writeError(w, http.StatusBadRequest, errNoVersioning)
		return
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	rec := f.forward(r, body)
	if rec.status == http.StatusOK {
		if err := f.meta.put(in.Name, m); err != nil {
			writeError(w, http.StatusInternalServerError, "bucket created, but its metadata was not saved: "+err.Error())
			return
		}
	}
	f.writeResponse(w, rec, f.overlayBucket)
}

// errNoVersioning is the answer to enabling versioning with the filesystem
// backend.
const errNoVersioning = "object versioning is not supported by this emulator's filesystem storage " +
	"(it was started with a storage directory); start it with in-memory storage to use versioning"

// existsAndMatches answers 404 for a missing bucket and 412 for a failed
// metageneration precondition, and reports whether the request may go on.
// f.mu must be held.
func (f *front) existsAndMatches(w http.ResponseWriter, r *http.Request, name string) bool {
	if exists, _, _ := f.bucketExists(name); !exists {
		writeNotFound(w)
		return false
	}
	return f.checkConditions(w, r, f.meta.lookup(name).Metageneration)
}

// getBucket answers a bucket get, honouring metageneration preconditions.
func (f *front) getBucket(w http.ResponseWriter, r *http.Request, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.existsAndMatches(w, r, name) {
		return
	}
	f.writeResponse(w, f.forward(r, nil), f.overlayBucket)
}

// patchBucket applies a bucket patch: labels, storage class and uniform
// bucket-level access to the record, versioning and event-based hold to
// fake-gcs-server, whose own patch resets the flags the patch leaves out.
func (f *front) patchBucket(w http.ResponseWriter, r *http.Request, name string) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var fields map[string]json.RawMessage
	var in bucketResource
	if err := errors.Join(json.Unmarshal(body, &fields), json.Unmarshal(body, &in)); err != nil {
		writeError(w, http.StatusBadRequest, "Invalid JSON payload: "+err.Error())
		return
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	exists, versioningOn, eventBasedHold := f.bucketExists(name)
	if !exists {
		writeNotFound(w)
		return
	}
	cur := f.meta.lookup(name)
	if !f.checkConditions(w, r, cur.Metageneration) {
		return
	}

	next := cur.clone()
	if isNull(fields["labels"]) {
		next.Labels = nil
	}
	for k, v := range in.Labels {
		if next.Labels == nil {
			next.Labels = map[string]string{}
		}
		if v == nil {
			delete(next.Labels, k)
		} else {
			next.Labels[k] = *v
		}
	}
	if _, ok := fields["storageClass"]; ok {
		next.StorageClass = strings.ToUpper(in.StorageClass)
	}
	if enabled, set := in.IamConfiguration.uniformBucketLevelAccess(); set {
		next.UniformBucketLevelAccess = enabled
	}
	if _, ok := fields["versioning"]; ok {
		versioningOn = in.Versioning != nil && in.Versioning.Enabled
	}
	if in.DefaultEventBasedHold != nil {
		eventBasedHold = *in.DefaultEventBasedHold
	}
	if err := next.validate(); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if f.noVersioning && versioningOn {
		writeError(w, http.StatusBadRequest, errNoVersioning)
		return
	}

	flags, err := json.Marshal(map[string]any{
		"versioning":            versioning{Enabled: versioningOn},
		"defaultEventBasedHold": eventBasedHold,
	})
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	rec := f.forward(r, flags)
	if rec.status == http.StatusOK {
		next.Metageneration = cur.Metageneration + 1
		if err := f.meta.put(name, next); err != nil {
			writeError(w, http.StatusInternalServerError, "bucket updated, but its metadata was not saved: "+err.Error())
			return
		}
	}
	f.writeResponse(w, rec, f.overlayBucket)
}

// deleteBucket deletes the bucket and its record. fake-gcs-server's 412 for
// a bucket that still holds objects becomes GCS's 409.
func (f *front) deleteBucket(w http.ResponseWriter, r *http.Request, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.existsAndMatches(w, r, name) {
		return
	}
	rec := f.forward(r, nil)
	switch {
	case rec.status == http.StatusPreconditionFailed:
		writeError(w, http.StatusConflict, "The bucket you tried to delete is not empty.")
		return
	case rec.status < http.StatusMultipleChoices:
		if err := f.meta.remove(name); err != nil {
			writeError(w, http.StatusInternalServerError, "bucket deleted, but its metadata was not saved: "+err.Error())
			return
		}
	}
	f.writeResponse(w, rec, nil)
}

// listBuckets answers a bucket list with every bucket's record added.
func (f *front) listBuckets(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writeResponse(w, f.forward(r, nil), func(list map[string]any) {
		if list["kind"] != "storage#buckets" {
			return
		}
		items, _ := list["items"].([]any)
		for _, item := range items {
			if b, ok := item.(map[string]any); ok {
				f.overlayBucket(b)
			}
		}
	})
}

// overlayBucket adds the record of a bucket resource's bucket to it: what
// fake-gcs-server dropped, and the metageneration.
func (f *front) overlayBucket(b map[string]any) {
	if b["kind"] != "storage#bucket" {
		return
	}
	name, _ := b["name"].(string)
	m := f.meta.lookup(name)
	if len(m.Labels) > 0 {
		b["labels"] = m.Labels
	} else {
		delete(b, "labels")
	}
	if m.Location != "" {
		b["location"] = m.Location
		b["locationType"] = locationType(m.Location)
	}
	if m.StorageClass != "" {
		b["storageClass"] = m.StorageClass
	}
	ubla := map[string]any{"enabled": m.UniformBucketLevelAccess}
	b["iamConfiguration"] = map[string]any{"uniformBucketLevelAccess": ubla, "bucketPolicyOnly": ubla}
	b["metageneration"] = strconv.FormatInt(m.Metageneration, 10)
}

// checkConditions applies ifMetagenerationMatch and
// ifMetagenerationNotMatch against the bucket's metageneration. When a
// condition fails it answers (412, or 304 for a get that matched
// ifMetagenerationNotMatch) and returns false.
func (f *front) checkConditions(w http.ResponseWriter, r *http.Request, metageneration int64) bool {
	q := r.URL.Query()
	for _, param := range []string{"ifMetagenerationMatch", "ifMetagenerationNotMatch"} {
		s := q.Get(param)
		if s == "" {
			continue
		}
		want, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("Invalid value for %s: %q", param, s))
			return false
		}
		match := want == metageneration
		switch {
		case param == "ifMetagenerationMatch" && !match:
			writeError(w, http.StatusPreconditionFailed, "At least one of the pre-conditions you specified did not hold.")
			return false
		case param == "ifMetagenerationNotMatch" && match && r.Method == http.MethodGet:
			w.WriteHeader(http.StatusNotModified)
			return false
		case param == "ifMetagenerationNotMatch" && match:
			writeError(w, http.StatusPreconditionFailed, "At least one of the pre-conditions you specified did not hold.")
			return false
		}
	}
	return true
}

// forward has fake-gcs-server answer r, with body as the request body, and
// returns the buffered answer.
func (f *front) forward(r *http.Request, body []byte) *bufferedResponse {
	out := r.Clone(r.Context())
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	out.Header.Set("Content-Length", strconv.Itoa(len(body)))
	out.Header.Del("Content-Encoding")
	out.Header.Del("Accept-Encoding")
	rec := &bufferedResponse{header: http.Header{}}
	f.handler.ServeHTTP(rec, out)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return rec
}

// writeResponse copies rec to w, with the JSON object of a 200 answer passed
// through transform first when transform is not nil.
func (f *front) writeResponse(w http.ResponseWriter, rec *bufferedResponse, transform func(map[string]any)) {
	body := rec.body.Bytes()
	if rec.status == http.StatusOK && transform != nil {
		var obj map[string]any
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		if dec.Decode(&obj) == nil {
			transform(obj)
			if out, err := json.Marshal(obj); err == nil {
				body = out
			}
		}
	}
	maps.Copy(w.Header(), rec.header)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(rec.status)
	_, _ = w.Write(body)
}

// readBody reads a bucket request's body, decompressing a gzip one. On
// failure it answers 400 or 413 and returns false.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	var src io.Reader = http.MaxBytesReader(w, r.Body, maxBucketBody)
	if strings.EqualFold(r.Header.Get("Content-Encoding"), "gzip") {
		zr, err := gzip.NewReader(src)
		if err != nil {
			writeError(w, http.StatusBadRequest, "Invalid gzip body: "+err.Error())
			return nil, false
		}
		defer zr.Close()
		src = io.LimitReader(zr, maxBucketBody+1)
	}
	body, err := io.ReadAll(src)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge) || len(body) > maxBucketBody:
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body exceeds %d bytes", maxBucketBody))
		return nil, false
	case err != nil:
		writeError(w, http.StatusBadRequest, "reading request body: "+err.Error())
		return nil, false
	}
	return body, true
}

// isNull reports whether a JSON value is present and null.
func isNull(v json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(v), []byte("null"))
}

// bufferedResponse is an http.ResponseWriter that keeps the answer.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }

func (b *bufferedResponse) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

func (b *bufferedResponse) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	return b.body.Write(p)
}

// writeNotFound answers GCS's 404 for a missing bucket.
func writeNotFound(w http.ResponseWriter) {
	writeError(w, http.StatusNotFound, "The specified bucket does not exist.")
}

// writeError answers a JSON API error, as GCS words it.
func writeError(w http.ResponseWriter, code int, msg string) {
	body, err := json.Marshal(map[string]any{"error": map[string]any{
		"code":    code,
		"message": msg,
		"errors":  []map[string]any{{"domain": "global", "reason": errorReason(code), "message": msg}},
	}})
	if err != nil {
		http.Error(w, msg, code)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// errorReason is the JSON API error reason for a status code.
func errorReason(code int) string {
	switch code {
	case http.StatusBadRequest:
		return "invalid"
	case http.StatusNotFound:
		return "notFound"
	case http.StatusConflict:
		return "conflict"
	case http.StatusPreconditionFailed:
		return "conditionNotMet"
	case http.StatusRequestEntityTooLarge:
		return "uploadTooLarge"
	default:
		return "backendError"
	}
}
