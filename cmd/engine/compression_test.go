package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// TestAPICompression: the engine's requests ask for no gzip unless
// --api-compression, which leaves it to the kubeconfig; the server sees
// what the transport sends.
func TestAPICompression(t *testing.T) {
	var mu sync.Mutex
	var acceptEncoding []string
	// TLS and HTTP/2, as an apiserver serves: client-go ignores the
	// setting over plain HTTP (http.DefaultTransport).
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		acceptEncoding = append(acceptEncoding, r.Header.Get("Accept-Encoding"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"APIVersions","versions":["v1"]}`))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	asked := func(t *testing.T, cfg *rest.Config) string {
		mu.Lock()
		acceptEncoding = nil
		mu.Unlock()
		dc, err := discovery.NewDiscoveryClientForConfig(cfg)
		require.NoError(t, err)
		require.NoError(t, dc.RESTClient().Get().AbsPath("/api").Do(context.Background()).Error())
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, acceptEncoding, 1)
		return acceptEncoding[0]
	}
	kubeconfig := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}

	t.Run("default", func(t *testing.T) {
		o := &runOptions{}
		cfg := o.apiConfig(kubeconfig)
		assert.Empty(t, asked(t, cfg), "no gzip asked for")
		assert.False(t, kubeconfig.DisableCompression, "the given config is not changed")
	})
	t.Run("--api-compression", func(t *testing.T) {
		o := &runOptions{apiCompression: true}
		assert.Equal(t, "gzip", asked(t, o.apiConfig(kubeconfig)))
	})
	t.Run("--api-compression with a kubeconfig that disables it", func(t *testing.T) {
		o := &runOptions{apiCompression: true}
		disabled := rest.CopyConfig(kubeconfig)
		disabled.DisableCompression = true
		assert.Empty(t, asked(t, o.apiConfig(disabled)))
	})
}
