package harness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stopGrace is how long a controller has to exit after SIGTERM.
const stopGrace = 10 * time.Second

// userHZ is the unit of the CPU times in /proc/<pid>/stat (USER_HZ, fixed
// at 100 by the Linux ABI).
const userHZ = 100

// process is a controller under test, running as a child process whose
// output goes to a log file.
type process struct {
	bin     string
	cmd     *exec.Cmd
	logPath string
	logFile *os.File
	exited  chan struct{}
	waitErr error
	anon    *anonPeak
	// started is when the process was executed.
	started time.Time
	// oomKilled is set, before exited is closed, when the limit of its
	// memory cgroup (Config.MemoryLimit) killed it.
	oomKilled bool
}

// startProcess starts bin with args and env added to the harness's
// environment, its stdout and stderr appended to logPath; in cg when not
// nil, which it removes once the process exits.
func startProcess(bin string, args, env []string, logPath string, cg *memoryCgroup) (*process, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating controller log: %w", err)
	}
	path, argv := bin, args
	if cg != nil {
		path, argv = cg.wrap(bin, args)
	}
	cmd := exec.Command(path, argv...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = f, f
	started := time.Now()
	if err := cmd.Start(); err != nil {
		f.Close()
		if cg != nil {
			err = errors.Join(err, cg.remove())
		}
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	p := &process{bin: bin, cmd: cmd, logPath: logPath, logFile: f, exited: make(chan struct{}), anon: &anonPeak{}, started: started}
	go func() {
		p.waitErr = cmd.Wait()
		if cg != nil {
			p.oomKilled = cg.oomKills() > 0
			if err := cg.remove(); err != nil {
				p.waitErr = errors.Join(p.waitErr, err)
			}
		}
		close(p.exited)
	}()
	go p.anon.sample(cmd.Process.Pid, p.exited)
	return p, nil
}

// anonSampleEvery is how often the anonymous RSS is sampled. The kernel
// keeps a peak only of the whole RSS (VmHWM), which also counts the pages
// of the executable a process has touched: a binary that links more
// packages shows more of them, whatever it allocates.
const anonSampleEvery = 100 * time.Millisecond

// anonPeak is the highest anonymous RSS (RssAnon: heap, stacks, runtime
// structures) seen in the samples so far.
type anonPeak struct {
	mu   sync.Mutex
	peak int64
}

func (a *anonPeak) sample(pid int, exited <-chan struct{}) {
	tick := time.NewTicker(anonSampleEvery)
	defer tick.Stop()
	for {
		if n, err := anonOf(pid); err == nil {
			a.observe(n)
		}
		select {
		case <-exited:
			return
		case <-tick.C:
		}
	}
}

func (a *anonPeak) observe(n int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.peak = max(a.peak, n)
}

func (a *anonPeak) get() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.peak
}

// alive returns an error, quoting the end of the log, once the process has
// exited.
func (p *process) alive() error {
	select {
	case <-p.exited:
		why := ""
		if p.oomKilled {
			why = ", killed by its memory cgroup's limit (-memory-limit)"
		}
		return fmt.Errorf("controller %s exited (%v%s); last lines of %s:\n%s",
			p.bin, p.waitErr, why, p.logPath, tail(p.logPath, 20))
	default:
		return nil
	}
}

// usage is one process's resource use at a point of a run.
type usage struct {
	cpu time.Duration // user + system, since the start
	rss int64         // peak resident set size (VmHWM), bytes
	// anon is the peak anonymous part of the RSS (RssAnon, sampled every
	// anonSampleEvery and at this point), bytes.
	anon int64
}

// usage returns the process's CPU time so far and its peak RSS, its child
// processes' added (the engine's provider plugins: what it costs is the
// engine's and its plugins' together).
func (p *process) usage() (usage, error) {
	pid := p.cmd.Process.Pid
	u, err := pidUsage(pid)
	if err != nil {
		return usage{}, err
	}
	for _, child := range children(pid) {
		if c, err := pidUsage(child); err == nil {
			u.cpu += c.cpu
			u.rss += c.rss
		}
	}
	if anon, err := anonOf(pid); err == nil {
		p.anon.observe(anon)
	}
	u.anon = p.anon.get()
	return u, nil
}

// anonOf is the anonymous RSS of pid and its children, now.
func anonOf(pid int) (int64, error) {
	anon, err := statusKiB(pid, "RssAnon:")
	if err != nil {
		return 0, err
	}
	for _, child := range children(pid) {
		if a, err := statusKiB(child, "RssAnon:"); err == nil {
			anon += a
		}
	}
	return anon, nil
}

// children lists the child processes of pid (none when /proc cannot say),
// over all its threads: /proc/<pid>/task/<tid>/children lists only the
// children that thread started, and a Go program starts them from any of
// its threads.
func children(pid int) []int {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil
	}
	var out []int
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, task.Name()))
		if err != nil {
			continue
		}
		out = append(out, parseChildren(string(b))...)
	}
	return out
}

// parseChildren parses the content of /proc/<pid>/task/<tid>/children.
func parseChildren(s string) []int {
	var out []int
	for _, f := range strings.Fields(s) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

func statusKiB(pid int, field string) (int64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseStatusKiB(string(status), field)
}

// pidUsage is one process's CPU time and peak RSS (anon left at 0).
func pidUsage(pid int) (usage, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return usage{}, fmt.Errorf("reading controller CPU time: %w", err)
	}
	cpu, err := parseCPU(string(stat))
	if err != nil {
		return usage{}, err
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return usage{}, fmt.Errorf("reading controller memory: %w", err)
	}
	rss, err := parseStatusKiB(string(status), "VmHWM:")
	if err != nil {
		return usage{}, err
	}
	return usage{cpu: cpu, rss: rss}, nil
}

// parseCPU returns utime + stime from the content of /proc/<pid>/stat.
func parseCPU(stat string) (time.Duration, error) {
	// utime and stime are fields 14 and 15 of proc(5).
	fields, err := statFields(stat)
	if err != nil {
		return 0, err
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed /proc stat %q: %w", stat, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// parseStatusKiB returns the field (such as "VmHWM:") in bytes from the
// content of /proc/<pid>/status.
func parseStatusKiB(status, field string) (int64, error) {
	for _, line := range strings.Split(status, "\n") {
		rest, ok := strings.CutPrefix(line, field)
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			break
		}
		kib, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed %s %q: %w", field, line, err)
		}
		return kib * 1024, nil
	}
	return 0, fmt.Errorf("no %s in /proc status", field)
}

// stop sends SIGTERM, then SIGKILL if the process has not exited after
// stopGrace, and closes the log.
func (p *process) stop() error {
	defer p.logFile.Close()
	select {
	case <-p.exited:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("stopping controller: %w", err)
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(stopGrace):
	}
	if err := p.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("killing controller: %w", err)
	}
	<-p.exited
	return nil
}

// group is the processes of one controller under test: a single one, or
// the replicas of a sharded engine.
type group []*process

// alive returns the error of the first process that has exited.
func (g group) alive() error {
	for _, p := range g {
		if err := p.alive(); err != nil {
			return err
		}
	}
	return nil
}

// started returns when the group's first process was executed.
func (g group) started() time.Time { return g[0].started }

// usage returns each process's usage, in the group's order.
func (g group) usage() ([]usage, error) {
	out := make([]usage, len(g))
	for i, p := range g {
		u, err := p.usage()
		if err != nil {
			return nil, err
		}
		out[i] = u
	}
	return out, nil
}

// stop stops every process, all at once: each has stopGrace to exit.
func (g group) stop() error {
	errs := make([]error, len(g))
	var wg sync.WaitGroup
	for i, p := range g {
		wg.Go(func() { errs[i] = p.stop() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// total sums the usage of several processes: CPU time, and peak RSS and
// anonymous RSS (the sums of the peaks, upper bounds of the peaks of the
// sums).
func total(use []usage) usage {
	var out usage
	for _, u := range use {
		out.cpu += u.cpu
		out.rss += u.rss
		out.anon += u.anon
	}
	return out
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
