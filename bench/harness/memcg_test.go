package harness

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMemoryCgroupDir: the memory cgroup a process is in, read from its
// /proc/<pid>/cgroup the way the kernel writes it: v1's memory controller
// first (also on a hybrid host, which mounts v2 beside it), else the v2
// hierarchy where the memory controller is enabled.
func TestMemoryCgroupDir(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "unified"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "unified", "cgroup.controllers"), []byte("cpu io memory pids\n"), 0o644))

	hybrid := "9:name=systemd:/\n4:memory:/process_api/8abd\n1:cpu:/\n0::/\n"
	dir, v2, err := memoryCgroupDir([]byte(hybrid), root)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(root, "memory", "process_api", "8abd"), dir)
	assert.False(t, v2)

	joint := "4:cpu,memory:/a\n"
	dir, _, err = memoryCgroupDir([]byte(joint), root)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(root, "memory", "a"), dir)

	unified := "0::/system.slice/ci.service\n"
	dir, v2, err = memoryCgroupDir([]byte(unified), root)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(root, "unified", "system.slice", "ci.service"), dir)
	assert.True(t, v2)

	require.NoError(t, os.WriteFile(filepath.Join(root, "cgroup.controllers"), []byte("memory\n"), 0o644))
	dir, _, err = memoryCgroupDir([]byte(unified), root)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(root, "system.slice", "ci.service"), dir, "a v2-only host mounts it at the root")

	_, _, err = memoryCgroupDir([]byte("1:cpu:/\n"), t.TempDir())
	assert.ErrorContains(t, err, "no memory cgroup hierarchy")
}
