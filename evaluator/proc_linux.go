package evaluator

import (
	"os"
	"slices"
	"strconv"
	"syscall"
)

// sysProcAttr kills an evaluator process when the engine's thread that
// started it dies, so that an engine that crashes leaves no evaluator
// behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// yieldCPU gives every thread of this process the niceness Niceness.
// Linux keeps a niceness per thread, and a new thread takes its creator's:
// so every thread there is is set, until a pass finds no thread it did not
// set before (one made meanwhile by a thread not yet set).
func yieldCPU() {
	var done []int
	for range 10 {
		entries, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return
		}
		var tids []int
		for _, e := range entries {
			if tid, err := strconv.Atoi(e.Name()); err == nil {
				tids = append(tids, tid)
			}
		}
		slices.Sort(tids)
		if slices.Equal(tids, done) {
			return
		}
		for _, tid := range tids {
			_ = syscall.Setpriority(syscall.PRIO_PROCESS, tid, Niceness)
		}
		done = tids
	}
}
