package webhooks

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cuengine/engine/templates"
)

// countingReader counts the bytes read from it.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// TestBodyBound: a review larger than MaxRequestBytes is refused with 413;
// one that says so in Content-Length is not read at all, one that does not
// is read no further than the bound.
func TestBodyBound(t *testing.T) {
	g := newGate(Bounds{MaxRequestBytes: 1 << 20})
	h := g.wrap(&converter{lookup: func(schema.GroupKind) (*templates.Template, bool) { return nil, false }, gate: g})
	big := bytes.Repeat([]byte("x"), 60<<20) // issue 51: a 60 MB ConversionReview

	body := &countingReader{r: bytes.NewReader(big)}
	req := httptest.NewRequest(http.MethodPost, PathConvert, body)
	req.ContentLength = int64(len(big))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
	assert.Equal(t, "the request is 62914560 bytes, more than the 1048576 the engine reads (--webhook-max-request-bytes)\n", rec.Body.String())
	assert.Zero(t, body.n.Load(), "refused before it is read")

	body = &countingReader{r: bytes.NewReader(big)}
	req = httptest.NewRequest(http.MethodPost, PathConvert, body)
	req.ContentLength = -1 // chunked: the size is not known up front
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
	assert.Equal(t, "the ConversionReview is more than the 1048576 bytes the engine reads (--webhook-max-request-bytes)\n", rec.Body.String())
	assert.LessOrEqual(t, body.n.Load(), int64(1<<20+64<<10), "read no further than the bound")
}

// TestInFlightBound: with every port slot taken, a request waits Wait,
// then gets 429 with Retry-After; once a slot is free it is served.
func TestInFlightBound(t *testing.T) {
	g := newGate(Bounds{MaxInFlight: 1, Wait: 50 * time.Millisecond})
	block, entered := make(chan struct{}), make(chan struct{}, 1)
	h := g.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-block
	}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, PathConvert, strings.NewReader("{}")))
	}()
	<-entered
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, PathConvert, strings.NewReader("{}")))
	assert.Equal(t, http.StatusTooManyRequests, rec.Code)
	assert.Equal(t, "1", rec.Header().Get("Retry-After"))
	assert.Equal(t, "the engine's webhook is busy: 1 requests are being read (--webhook-max-in-flight)\n", rec.Body.String())
	close(block)
	<-done
	go h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, PathConvert, strings.NewReader("{}")))
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("a request was not served once the slot was free")
	}
}

// TestPortSlotGivenBackOnceDecoded: a request waiting for its kind's slot
// does not hold a port slot, so other kinds' requests are read meanwhile.
func TestPortSlotGivenBackOnceDecoded(t *testing.T) {
	g := newGate(Bounds{MaxInFlight: 1, MaxPerKind: 1, Wait: 5 * time.Second})
	flooded := schema.GroupKind{Group: "a.dev", Kind: "Runaway"}
	hold, err := g.kind(context.Background(), flooded)
	require.NoError(t, err) // a runaway evaluation of the flooded kind
	waiting := make(chan error, 1)
	h := g.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		releasePort(r.Context())
		_, err := g.kind(r.Context(), flooded)
		waiting <- err
	}))
	go h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, PathConvert, strings.NewReader("{}")))

	served := make(chan struct{})
	other := g.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		release, err := g.kind(r.Context(), schema.GroupKind{Group: "b.dev", Kind: "Healthy"})
		if assert.NoError(t, err) {
			release()
		}
		close(served)
	}))
	rec := httptest.NewRecorder()
	other.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, PathConvert, strings.NewReader("{}")))
	<-served
	assert.Equal(t, http.StatusOK, rec.Code)
	hold()
	require.NoError(t, <-waiting, "the flooded kind's request is served once the runaway ends")
}

// TestKindBound: a kind's evaluations at once are MaxPerKind; MaxWaiting
// wait (then are refused after Wait), more are refused at once; a
// slot comes back when the evaluation ends, and only once.
func TestKindBound(t *testing.T) {
	g := newGate(Bounds{MaxPerKind: 1, MaxWaiting: 2, Wait: 50 * time.Millisecond, KindWait: 50 * time.Millisecond})
	gk := schema.GroupKind{Group: "a.dev", Kind: "A"}
	release, err := g.kind(context.Background(), gk)
	require.NoError(t, err)
	_, err = g.kind(context.Background(), gk)
	require.EqualError(t, err, "the engine's webhook is busy with A.a.dev: 1 of its evaluations are running (--webhook-max-per-kind), some perhaps past --evaluation-timeout, and more wait")
	other, err := g.kind(context.Background(), schema.GroupKind{Group: "b.dev", Kind: "B"})
	require.NoError(t, err, "another kind has its own slots")
	other()

	g.bounds.KindWait = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 2)
	for range 2 {
		go func() { _, err := g.kind(ctx, gk); errs <- err }()
	}
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.kinds[gk].waiting == 2
	}, 10*time.Second, 5*time.Millisecond)
	start := time.Now()
	_, err = g.kind(context.Background(), gk)
	require.Error(t, err, "the queue is full: refused at once")
	assert.Less(t, time.Since(start), time.Hour)
	cancel()
	require.Error(t, <-errs)
	require.Error(t, <-errs)

	g.bounds.KindWait = 50 * time.Millisecond
	release()
	release() // a second call gives nothing back twice
	again, err := g.kind(context.Background(), gk)
	require.NoError(t, err)
	_, err = g.kind(context.Background(), gk)
	require.Error(t, err, "one slot, not two")
	again()
}

// TestClientCA: with a client CA, /validate answers only a client that
// presents a certificate it signed; a path that does not require one (the
// apiserver's conversions carry none) answers a client without one, but
// never one whose certificate the CA did not sign.
func TestClientCA(t *testing.T) {
	cert, leaf := selfSigned(t)
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	require.NoError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Raw}), 0o600))
	opt, err := verifyClientCA(caFile)
	require.NoError(t, err)

	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux := http.NewServeMux()
	mux.Handle(PathValidate, requireClientCert(ok))
	mux.Handle(PathConvert, ok)
	srv := httptest.NewUnstartedServer(mux)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	opt(srv.TLS)
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(leaf)

	get := func(c *http.Client, path string) (int, string) {
		resp, err := c.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	anonymous := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	code, body := get(anonymous, PathValidate)
	assert.Equal(t, http.StatusForbidden, code, "no client certificate: /validate refuses")
	assert.Equal(t, "a client certificate signed by --webhook-client-ca-file is required", body)
	code, body = get(anonymous, PathConvert)
	assert.Equal(t, http.StatusOK, code, "the apiserver's conversions carry no certificate")
	assert.Equal(t, "ok", body)

	strangerCert, _ := selfSigned(t)
	unknown := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{strangerCert}}}}
	_, err = unknown.Get(srv.URL + PathConvert)
	require.Error(t, err, "a certificate the CA did not sign: no answer on any path")

	signed := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}}}
	code, body = get(signed, PathValidate)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok", body)

	_, err = verifyClientCA(filepath.Join(t.TempDir(), "none"))
	require.Error(t, err)
	empty := filepath.Join(t.TempDir(), "empty.crt")
	require.NoError(t, os.WriteFile(empty, []byte("not a certificate"), 0o600))
	_, err = verifyClientCA(empty)
	require.EqualError(t, err, "the webhook's client CA "+empty+" holds no PEM certificate")
}

// selfSigned is a CA certificate for 127.0.0.1 that serves and is a
// client too.
func selfSigned(t *testing.T) (tls.Certificate, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, leaf
}
