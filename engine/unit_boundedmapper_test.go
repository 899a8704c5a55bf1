package engine

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// TestBoundedMapperEndsOnAHangingCluster (issue 53 item 2): a workload
// cluster that accepts connections and never answers holds a lookup of a
// kind its mapper has not seen for the call bound, not for ever: the
// lookup runs inside a client call and takes no context.
func TestBoundedMapperEndsOnAHangingCluster(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	cfg := &rest.Config{Host: srv.URL}
	hc, err := rest.HTTPClientFor(cfg)
	require.NoError(t, err)

	m, err := boundedMapper(200*time.Millisecond)(cfg, hc)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := m.RESTMapping(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "v1")
		done <- err
	}()
	select {
	case err := <-done:
		require.Error(t, err)
		assert.True(t, timedOut(err), "a timeout the boundedClient reports as unanswered: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the lookup still waits on the hanging cluster")
	}
	assert.Zero(t, hc.Timeout, "the cluster's own client, which its watches use, has no timeout")
}
