package harness

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cuengine/engine/templates"
)

// TestRemoteTemplateLoads: the template the benchmark of children in
// other clusters writes compiles, and its policy allows exactly the
// clusters of the run.
func TestRemoteTemplateLoads(t *testing.T) {
	for _, k := range []int{0, 1, 5} {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "remote.cue"), []byte(remoteTemplate(k)), 0o644))
		set, err := templates.Load(dir)
		require.NoError(t, err, "k=%d", k)
		require.Len(t, set.Templates(), 1)
		pol := set.Templates()[0].Policy
		for i := range k {
			assert.True(t, pol.Clusters.Allows(clusterName(i)), "k=%d: %s", k, clusterName(i))
		}
		assert.False(t, pol.Clusters.Allows(clusterName(k)), "k=%d: %s", k, clusterName(k))
		assert.Equal(t, k > 0, pol.Clusters.Any(), "k=%d", k)
	}
}

func TestClusterOfSpreadsTheParents(t *testing.T) {
	assert.Equal(t, 3, clusterOf("warm-3", 5))
	assert.Equal(t, 2, clusterOf("r-00007", 5))
	assert.Equal(t, 0, clusterOf("one-4", 1))
	assert.Equal(t, -1, clusterOf("r-00007", 0), "no workload cluster: local")
}

func TestQuantile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	assert.Equal(t, 50*time.Millisecond, quantile(d, 0.5))
	assert.Equal(t, 95*time.Millisecond, quantile(d, 0.95))
	assert.Equal(t, 100*time.Millisecond, quantile(d, 1))
	assert.Equal(t, time.Duration(0), quantile(nil, 0.5))
}
