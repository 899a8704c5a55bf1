package main

import (
	"errors"
	"math"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMemoryLimitFromTheContainer: without GOMEMLIMIT, `engine run` gives
// the Go runtime nine tenths of its container's memory limit, says so, and
// leaves the runtime alone when GOMEMLIMIT is set, the ratio is 0, there is
// no limit or no cgroup; a limit it cannot read is a warning.
func TestMemoryLimitFromTheContainer(t *testing.T) {
	const gib = 1 << 30
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	cases := []struct {
		name     string
		env      string
		ratio    float64
		provider memlimit.Provider
		want     int64
		called   bool
		log      string
	}{
		{"a 1Gi container", "", defaultMemoryLimitRatio, memlimit.Limit(gib), 966367641 /* 0.9 GiB */, true, `"limit"="1024MiB" "GOMEMLIMIT"="921MiB"`},
		{"GOMEMLIMIT wins", "500MiB", defaultMemoryLimitRatio, memlimit.Limit(gib), 500 << 20, false, "Go memory limit from GOMEMLIMIT"},
		{"ratio 0 turns it off", "", 0, memlimit.Limit(gib), math.MaxInt64, false, ""},
		{"half", "", 0.5, memlimit.Limit(gib), gib / 2, true, `"GOMEMLIMIT"="512MiB"`},
		{"no limit", "", defaultMemoryLimitRatio, func() (uint64, error) { return 0, memlimit.ErrNoLimit }, math.MaxInt64, true, "the container has no memory limit"},
		{"no cgroup", "", defaultMemoryLimitRatio, func() (uint64, error) { return 0, memlimit.ErrNoCgroup }, math.MaxInt64, true, ""},
		{"unreadable", "", defaultMemoryLimitRatio, func() (uint64, error) { return 0, errors.New("permission denied") }, math.MaxInt64, true, "WARNING: no Go memory limit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			t.Setenv("GOMEMLIMIT", c.env)
			t.Setenv("AUTOMEMLIMIT", "") // restored after the test
			require.NoError(t, os.Unsetenv("AUTOMEMLIMIT"))
			if c.env != "" {
				debug.SetMemoryLimit(500 << 20) // as the runtime read it at start
			}
			var mu sync.Mutex
			var logs []string
			log := funcr.New(func(prefix, args string) {
				mu.Lock()
				defer mu.Unlock()
				logs = append(logs, args)
			}, funcr.Options{Verbosity: 0})
			called := false
			got := setMemoryLimit(log, c.ratio, func() (uint64, error) {
				called = true
				return c.provider()
			})
			assert.Equal(t, c.want, got, "the limit returned")
			assert.Equal(t, c.want, debug.SetMemoryLimit(-1), "the runtime's limit")
			assert.Equal(t, c.called, called, "the provider asked")
			all := strings.Join(logs, "\n")
			if c.log == "" {
				assert.Empty(t, all)
			} else {
				require.Contains(t, all, c.log)
			}
		})
	}
}
