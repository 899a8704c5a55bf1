package gcs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// fault is one injected failure: it applies to the next `times` requests
// that match. Exactly one of status, forwardThen or stall is used.
type fault struct {
	method string         // empty: any
	path   *regexp.Regexp // nil: any
	times  int            // <= 0: every matching request
	// status answers the request with this code without forwarding it.
	status int
	// forwardThen forwards the request, so the emulator acts on it, and
	// then answers this code instead of the real response: a lost response.
	forwardThen int
	// stall holds the request until the client gives up on it.
	stall bool
	used  int
}

func (f *fault) matches(r *http.Request) bool {
	return (f.method == "" || f.method == r.Method) && (f.path == nil || f.path.MatchString(r.URL.Path))
}

// faultProxy is an httputil.ReverseProxy in front of the emulator that
// injects faults and logs what the client saw.
//
// With labels on, it also keeps bucket labels, which fake-gcs-server v1.56.1
// drops: it records the labels of every successful bucket insert and patch
// and adds them to the bucket resources the emulator returns. Without that
// the provider can never prove ownership of an emulator bucket (see
// TestEmulatorWithoutLabelsNeverAdopts).
type faultProxy struct {
	proxy  *httputil.ReverseProxy
	srv    *httptest.Server
	labels bool

	mu     sync.Mutex
	faults []*fault
	seen   []string // "METHOD /path -> code" as the client saw it
	store  map[string]map[string]string
}

// newFaultProxy starts a proxy to target on a loopback port.
func newFaultProxy(t *testing.T, target string, labels bool) *faultProxy {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	p := &faultProxy{labels: labels, store: map[string]map[string]string{}}
	p.proxy = &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(u)
		r.Out.Host = r.In.Host              // as NewSingleHostReverseProxy does
		r.Out.Header.Del("Accept-Encoding") // plain bodies, so labels can be added
	}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

// URL is the proxy's base URL.
func (p *faultProxy) URL() string { return p.srv.URL }

// inject adds faults, applied in order.
func (p *faultProxy) inject(fs ...*fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = append(p.faults, fs...)
}

// log returns what the client saw so far.
func (p *faultProxy) log() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...)
}

// count is the number of logged entries with the given prefix.
func (p *faultProxy) count(prefix string) int {
	n := 0
	for _, l := range p.log() {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// take returns the first fault that applies to r, using one of its times.
func (p *faultProxy) take(r *http.Request) *fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.faults {
		if f.matches(r) && (f.times <= 0 || f.used < f.times) {
			f.used++
			return f
		}
	}
	return nil
}

func (p *faultProxy) record(r *http.Request, code int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = append(p.seen, fmt.Sprintf("%s %s -> %d", r.Method, r.URL.Path, code))
}

func (p *faultProxy) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	f := p.take(r)
	switch {
	case f == nil:
		rec := p.forward(r, body)
		p.record(r, rec.Code)
		p.copyResponse(w, rec)
	case f.stall:
		<-r.Context().Done()
		p.record(r, 0)
	case f.forwardThen != 0:
		p.forward(r, body)
		p.record(r, f.forwardThen)
		writeError(w, f.forwardThen, "injected after forwarding")
	default:
		p.record(r, f.status)
		writeError(w, f.status, "injected")
	}
}

// forward sends the request to the emulator and records the response.
func (p *faultProxy) forward(r *http.Request, body []byte) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	p.proxy.ServeHTTP(rec, r)
	p.remember(r, body, rec.Code)
	return rec
}

// copyResponse writes the emulator's response, with the remembered labels
// added to a bucket resource.
func (p *faultProxy) copyResponse(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	body := p.addLabels(rec.Code, rec.Body.Bytes())
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(rec.Code)
	_, _ = w.Write(body)
}

// remember keeps the labels of a successful bucket insert, patch or delete.
func (p *faultProxy) remember(r *http.Request, body []byte, code int) {
	if !p.labels || code >= 300 {
		return
	}
	var in struct {
		Name   string             `json:"name"`
		Labels map[string]*string `json:"labels"`
	}
	_ = json.Unmarshal(body, &in)
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/storage/v1/b":
		p.store[in.Name] = map[string]string{}
		mergeLabels(p.store[in.Name], in.Labels)
	case r.Method == http.MethodPatch && bucketPath.MatchString(r.URL.Path):
		name := unescape(bucketPath.FindStringSubmatch(r.URL.Path)[1])
		if p.store[name] == nil {
			p.store[name] = map[string]string{}
		}
		mergeLabels(p.store[name], in.Labels)
	case r.Method == http.MethodDelete && bucketPath.MatchString(r.URL.Path):
		delete(p.store, unescape(bucketPath.FindStringSubmatch(r.URL.Path)[1]))
	}
}

func mergeLabels(dst map[string]string, patch map[string]*string) {
	for k, v := range patch {
		if v == nil {
			delete(dst, k)
		} else {
			dst[k] = *v
		}
	}
}

// addLabels adds the remembered labels to a bucket resource.
func (p *faultProxy) addLabels(code int, body []byte) []byte {
	if !p.labels || code != http.StatusOK {
		return body
	}
	var bucket map[string]any
	if json.Unmarshal(body, &bucket) != nil || bucket["kind"] != "storage#bucket" {
		return body
	}
	name, _ := bucket["name"].(string)
	p.mu.Lock()
	if l, ok := p.store[name]; ok {
		bucket["labels"] = copyLabels(l)
	}
	p.mu.Unlock()
	out, err := json.Marshal(bucket)
	if err != nil {
		return body
	}
	return out
}
