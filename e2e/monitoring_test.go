package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The dashboard and the alerts of config/components/monitoring (and of the
// chart, which copies them).
var monitoringFiles = []string{
	"config/components/monitoring/engine-dashboard.json",
	"config/components/monitoring/prometheusrule.yaml",
}

var (
	promcheckOnce sync.Once
	promcheckErr  error
)

// promcheck builds hack/tools/promcheck into bin/ once (Prometheus's
// parsers live in that module, not in the engine's go.mod; go's build cache
// makes it quick when unchanged) and runs it.
func promcheck(t *testing.T, args ...string) string {
	t.Helper()
	path := filepath.Join(bin, "promcheck")
	promcheckOnce.Do(func() {
		t.Log("building hack/tools/promcheck (about a minute the first time)")
		cmd := exec.Command("go", "build", "-o", path, ".")
		cmd.Dir = filepath.Join(repo, "hack/tools/promcheck")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		promcheckErr = cmd.Run()
	})
	require.NoError(t, promcheckErr, "building hack/tools/promcheck")
	out, err := exec.Command(path, args...).Output()
	var stderr string
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = string(ee.Stderr)
	}
	require.NoError(t, err, "promcheck %s: %s", strings.Join(args, " "), stderr)
	return string(out)
}

// assertMonitoredMetricsServed checks that every metric the dashboard's
// queries and the alerts' expressions select is in a scrape of the engine's
// /metrics: a renamed or dropped metric fails here, not in an empty panel
// or an alert that can never fire.
func assertMonitoredMetricsServed(t *testing.T, scrape string) {
	t.Helper()
	var files []string
	for _, f := range monitoringFiles {
		files = append(files, filepath.Join(repo, f))
	}
	wanted := strings.Fields(promcheck(t, append([]string{"metrics"}, files...)...))
	require.NotEmpty(t, wanted)
	served := scrapedNames(scrape)
	for _, name := range wanted {
		assert.True(t, served[name], "the dashboard or the alerts query %s, which the engine does not export", name)
	}
}

// scrapedNames are the names of the samples of a Prometheus text scrape.
func scrapedNames(scrape string) map[string]bool {
	names := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(scrape))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names
}
