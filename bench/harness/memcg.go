package harness

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// memoryCgroup is a memory cgroup with a limit, made for one controller
// process: what a container's memory limit is to it (Config.MemoryLimit).
// A controller that reads its limit (the engine sets its Go memory limit
// from it) sees the limit a pod would give it, and one that outgrows it is
// killed as the kubelet's container would be. It is a child of the
// harness's own memory cgroup, on cgroup v1 or v2.
type memoryCgroup struct {
	dir string
	v2  bool
}

// newMemoryCgroup makes a memory cgroup named name holding at most limit
// bytes (swap off, where the kernel has the knob).
func newMemoryCgroup(name string, limit int64) (*memoryCgroup, error) {
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("memory limit: %w", err)
	}
	parent, v2, err := memoryCgroupDir(own, "/sys/fs/cgroup")
	if err != nil {
		return nil, fmt.Errorf("memory limit: %w", err)
	}
	c := &memoryCgroup{dir: filepath.Join(parent, fmt.Sprintf("bench-%s-%d", name, os.Getpid())), v2: v2}
	_ = c.remove() // one left by a killed run
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("memory limit: making a memory cgroup (as root, with the memory controller enabled): %w", err)
	}
	files := map[string]string{"memory.limit_in_bytes": strconv.FormatInt(limit, 10)}
	optional := map[string]string{"memory.memsw.limit_in_bytes": strconv.FormatInt(limit, 10)}
	if v2 {
		files = map[string]string{"memory.max": strconv.FormatInt(limit, 10)}
		optional = map[string]string{"memory.swap.max": "0"}
	}
	for f, v := range files {
		if err := os.WriteFile(filepath.Join(c.dir, f), []byte(v), 0o644); err != nil {
			return nil, errors.Join(fmt.Errorf("memory limit: %w", err), c.remove())
		}
	}
	for f, v := range optional {
		_ = os.WriteFile(filepath.Join(c.dir, f), []byte(v), 0o644) // no swap accounting: no swap to bound
	}
	return c, nil
}

// memoryCgroupDir is the directory of the memory cgroup a process is in,
// from its /proc/<pid>/cgroup, under root (cgroup v1's memory hierarchy,
// or the v2 hierarchy where it has the memory controller), and whether it
// is v2.
func memoryCgroupDir(procCgroup []byte, root string) (dir string, v2 bool, err error) {
	var unified string
	sc := bufio.NewScanner(bytes.NewReader(procCgroup))
	for sc.Scan() {
		id, rest, _ := strings.Cut(sc.Text(), ":")
		controllers, path, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		if id == "0" && controllers == "" {
			unified = path
			continue
		}
		for c := range strings.SplitSeq(controllers, ",") {
			if c == "memory" {
				return filepath.Join(root, "memory", path), false, nil
			}
		}
	}
	if unified != "" {
		for _, base := range []string{root, filepath.Join(root, "unified")} {
			if b, err := os.ReadFile(filepath.Join(base, "cgroup.controllers")); err == nil && bytes.Contains(b, []byte("memory")) {
				return filepath.Join(base, unified), true, nil
			}
		}
	}
	return "", false, errors.New("no memory cgroup hierarchy (neither v1's memory controller nor v2's)")
}

// wrap returns the command that runs bin with args inside the cgroup: a
// shell that moves itself in and executes bin, so the controller is in
// the cgroup from its first instruction and keeps the shell's pid.
func (c *memoryCgroup) wrap(bin string, args []string) (string, []string) {
	return "/bin/sh", append([]string{"-c", `echo $$ > "$0" && exec "$@"`, filepath.Join(c.dir, "cgroup.procs"), bin}, args...)
}

// oomKills is how many processes the cgroup's limit has killed.
func (c *memoryCgroup) oomKills() int {
	f := "memory.oom_control"
	if c.v2 {
		f = "memory.events"
	}
	b, err := os.ReadFile(filepath.Join(c.dir, f))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// remove removes the cgroup once its processes are gone (the kernel
// frees an exited process's membership shortly after it is reaped).
func (c *memoryCgroup) remove() error {
	var err error
	for range 50 {
		if err = os.Remove(c.dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("removing memory cgroup %s: %w", c.dir, err)
}
