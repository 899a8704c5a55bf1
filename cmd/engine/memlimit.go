package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/logr"
)

// defaultMemoryLimitRatio is the share of the container's memory limit
// the engine gives the Go runtime as its soft limit when GOMEMLIMIT is not
// set: the chart's nine tenths (charts/engine, config/deployment.yaml),
// and Prometheus' default for its --auto-gomemlimit.
const defaultMemoryLimitRatio = 0.9

// setMemoryLimit gives the Go runtime a soft memory limit of ratio times
// the memory limit provider reports (the container's cgroup, in `engine
// run`) unless GOMEMLIMIT (or AUTOMEMLIMIT=off) says otherwise or ratio is
// 0. Without a limit the collector lets the heap grow to twice what is
// live, which a container's limit turns into an OOM kill long before the
// live heap reaches it (docs/benchmarks.md, Scale). It says what it did;
// a limit it cannot read is a warning, and the engine runs on without
// one. It returns the runtime's limit, math.MaxInt64 for none.
func setMemoryLimit(log logr.Logger, ratio float64, provider memlimit.Provider) int64 {
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		log.Info("Go memory limit from GOMEMLIMIT", "GOMEMLIMIT", v)
		return debug.SetMemoryLimit(-1)
	}
	if ratio == 0 {
		return debug.SetMemoryLimit(-1)
	}
	var seen uint64
	limit, err := memlimit.Set(memlimit.WithRatio(ratio), memlimit.WithProvider(func() (uint64, error) {
		l, err := provider()
		seen = l
		return l, err
	}))
	switch {
	case errors.Is(err, memlimit.ErrNoCgroup):
		log.V(1).Info("no Go memory limit: the engine runs in no memory cgroup (GOMEMLIMIT sets one)")
	case err != nil:
		log.Error(err, "WARNING: no Go memory limit: the container's memory limit could not be read; set GOMEMLIMIT to about nine tenths of it")
	case limit == math.MaxInt64:
		log.Info("no Go memory limit: the container has no memory limit (GOMEMLIMIT sets one)")
	default:
		log.Info("Go memory limit set from the container's memory limit",
			"limit", fmt.Sprintf("%dMiB", seen>>20),
			"GOMEMLIMIT", fmt.Sprintf("%dMiB", limit>>20),
			"ratio", ratio)
	}
	return limit
}
