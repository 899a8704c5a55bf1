package harness

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// The control plane's CPU time: the controller under test, etcd and the
// kube-apiserver share the machine's cores, so how much of a phase the
// control plane spent tells where its latency went.

// controlPlaneNames are the processes of a bare control plane.
var controlPlaneNames = []string{"etcd", "kube-apiserver"}

// controlPlanePIDs finds the etcd and kube-apiserver of the control plane
// whose working directory is dir: child processes of the harness (envtest
// starts them) named so, whose command line mentions dir (etcd's data and
// the apiserver's certificates live there).
func controlPlanePIDs(dir string) ([]int, error) {
	var out []int
	found := map[string]bool{}
	for _, pid := range children(os.Getpid()) {
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil {
			continue
		}
		name := strings.TrimSpace(string(comm))
		if !slices.Contains(controlPlaneNames, name) {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !strings.Contains(string(cmdline), dir) {
			continue
		}
		out = append(out, pid)
		found[name] = true
	}
	for _, name := range controlPlaneNames {
		if !found[name] {
			return nil, fmt.Errorf("no %s process of the control plane in %s", name, dir)
		}
	}
	return out, nil
}

// statFields returns the fields of /proc/<pid>/stat after the command
// name, which is in parentheses and may contain spaces: fields[0] is the
// state (field 3 of proc(5)).
func statFields(stat string) ([]string, error) {
	end := strings.LastIndexByte(stat, ')')
	if end < 0 {
		return nil, fmt.Errorf("malformed /proc stat %q", stat)
	}
	fields := strings.Fields(stat[end+1:])
	if len(fields) < 13 {
		return nil, fmt.Errorf("malformed /proc stat %q", stat)
	}
	return fields, nil
}

// cpuOf sums the CPU time (utime + stime) of pids.
func cpuOf(pids []int) (time.Duration, error) {
	var sum time.Duration
	for _, pid := range pids {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, fmt.Errorf("reading control plane CPU time: %w", err)
		}
		cpu, err := parseCPU(string(stat))
		if err != nil {
			return 0, err
		}
		sum += cpu
	}
	return sum, nil
}
