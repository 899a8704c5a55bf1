package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The engine's metrics as the tests read them: one scrape of a replica's
// plain-HTTP /metrics, and the samples in it. (metricsauth_test.go scrapes
// the secure endpoint with a token.)

// scrapePlain GETs the engine's plain-HTTP /metrics (--metrics-secure=false).
func scrapePlain(t *testing.T, addr string) string {
	t.Helper()
	body, err := scrapePlainErr(addr)
	require.NoError(t, err)
	return body
}

// scrapePlainErr is scrapePlain for a caller that polls: an engine not
// serving yet, or gone, is an error to retry.
func scrapePlainErr(addr string) (string, error) {
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return string(b), nil
}

// metricSum sums the samples of a metric whose labels contain label ("":
// all of them) in a Prometheus text scrape.
func metricSum(scrape, name, label string) float64 {
	sum := 0.0
	sc := bufio.NewScanner(strings.NewReader(scrape))
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest == "" || (rest[0] != '{' && rest[0] != ' ')) || !strings.Contains(rest, label) {
			continue
		}
		f := strings.Fields(rest[strings.LastIndex(rest, "}")+1:])
		if len(f) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(f[0], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// metricValue is the value of one sample of a scrape, by its name and
// labels as exposed (`engine_shard_standby{shard="s2"}`); -1 when absent.
func metricValue(scrape, sample string) (float64, error) {
	for _, line := range strings.Split(scrape, "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return -1, nil
}
