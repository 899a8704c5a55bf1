package e2e

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// metricsTokens returns the tokens of two ServiceAccounts made in ns: one
// bound to the ClusterRole that may read the engine's metrics (role), one
// bound to nothing.
func metricsTokens(t *testing.T, ns, role string) (reader, other string) {
	t.Helper()
	kubectl(t, "-n", ns, "create", "serviceaccount", "scraper")
	kubectl(t, "-n", ns, "create", "serviceaccount", "stranger")
	binding := ns + "-metrics-reader"
	kubectl(t, "create", "clusterrolebinding", binding, "--clusterrole="+role, "--serviceaccount="+ns+":scraper")
	t.Cleanup(func() { _, _ = kubectlErr("delete", "clusterrolebinding", binding, "--ignore-not-found") })
	// The apiserver's authorizer sees the binding a moment after it is
	// made; the engine caches a denial for 30 s, so ask before it does.
	eventually(t, "the scraper to be allowed GET /metrics", 30*time.Second, func(ctx context.Context) (bool, error) {
		out, _ := kubectlErr("auth", "can-i", "get", "/metrics", "--as=system:serviceaccount:"+ns+":scraper")
		return strings.HasSuffix(strings.TrimSpace(out), "yes"), nil
	})
	reader = strings.TrimSpace(kubectl(t, "-n", ns, "create", "token", "scraper", "--duration=1h"))
	other = strings.TrimSpace(kubectl(t, "-n", ns, "create", "token", "stranger", "--duration=1h"))
	return reader, other
}

// scrapeMetrics GETs https://addr/metrics with a bearer token ("" for
// none). The engine's certificate is self-signed, so it is not verified.
func scrapeMetrics(t *testing.T, addr, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the engine's self-signed certificate
	}}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// assertMetricsGuarded: the metrics endpoint at addr refuses a scrape
// without a token (401), with a token the apiserver does not know, and
// with the token of an identity that may not read metrics (403), and
// serves a token of one that may; it returns what that scrape read.
func assertMetricsGuarded(t *testing.T, addr, ns, role string) string {
	t.Helper()
	// The listener opens once the self-signed certificate is made (two
	// RSA keys: a moment, longer on a busy machine).
	eventually(t, "the metrics endpoint to listen", 30*time.Second, func(ctx context.Context) (bool, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return false, nil
		}
		return true, c.Close()
	})
	reader, other := metricsTokens(t, ns, role)
	code, body := scrapeMetrics(t, addr, "")
	assert.Equal(t, http.StatusUnauthorized, code, "an anonymous scrape: %s", body)
	// A token the apiserver does not know: its TokenReview answers with an
	// error, which controller-runtime's filter turns into a 500.
	code, body = scrapeMetrics(t, addr, "not-a-token")
	assert.NotEqual(t, http.StatusOK, code, "a scrape with a bad token: %s", body)
	assert.NotContains(t, body, "# HELP", "a scrape with a bad token reads nothing")
	code, body = scrapeMetrics(t, addr, other)
	assert.Equal(t, http.StatusForbidden, code, "a scrape by an identity without the reader role: %s", body)
	code, body = scrapeMetrics(t, addr, reader)
	require.Equal(t, http.StatusOK, code, "a scrape with the reader role: %s", body)
	return body
}
