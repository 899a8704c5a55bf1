package evaluator

import (
	"os"
	"sync"
)

// Resident reads a process's resident set from /proc/PID/statm, where
// there is one (Linux), as the kernel counts it for the OOM killer;
// elsewhere it knows nothing. It allocates nothing per read: the engine's
// watch of its own memory must not wait on a garbage collection. Safe for
// concurrent use.
type Resident struct {
	mu  sync.Mutex
	f   *os.File
	buf [256]byte
}

// OpenResident opens the resident set of pid: a process ID, or "self".
func OpenResident(pid string) *Resident {
	f, _ := os.Open("/proc/" + pid + "/statm")
	return &Resident{f: f}
}

// Bytes returns the resident bytes, false where they cannot be read.
func (r *Resident) Bytes() (uint64, bool) {
	if r.f == nil {
		return 0, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n, err := r.f.ReadAt(r.buf[:], 0)
	if n == 0 && err != nil {
		return 0, false
	}
	// "size resident shared ...": the second field, in pages.
	i := 0
	for i < n && r.buf[i] != ' ' {
		i++
	}
	i++
	var pages uint64
	digits := 0
	for ; i < n && r.buf[i] >= '0' && r.buf[i] <= '9'; i++ {
		pages = pages*10 + uint64(r.buf[i]-'0')
		digits++
	}
	return pages * uint64(os.Getpagesize()), digits > 0
}

// Close closes the file.
func (r *Resident) Close() {
	if r.f != nil {
		_ = r.f.Close()
	}
}
