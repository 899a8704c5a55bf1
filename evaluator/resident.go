package evaluator

import (
	"os"
	"strconv"
)

// resident reads a process's resident set from /proc/PID/statm, where
// there is one (Linux); elsewhere it knows nothing, and only the timeout
// and the process's GOMEMLIMIT bound it.
type resident struct {
	f   *os.File
	buf [256]byte
}

func residentReader(pid int) *resident {
	f, _ := os.Open("/proc/" + strconv.Itoa(pid) + "/statm")
	return &resident{f: f}
}

// read returns the resident bytes.
func (r *resident) read() (uint64, bool) {
	if r.f == nil {
		return 0, false
	}
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

func (r *resident) close() {
	if r.f != nil {
		_ = r.f.Close()
	}
}
