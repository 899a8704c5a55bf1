package localcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

const (
	// stopGrace is how long a process may take to exit after SIGTERM before
	// it is killed.
	stopGrace = 5 * time.Second
	// logTailBytes bounds the log tail quoted in start errors.
	logTailBytes = 4096
)

// process is one started control-plane binary whose output goes to a log
// file.
type process struct {
	name    string
	logPath string
	binDir  string
	args    []string // to start it again as it was (Revive)
	cmd     *exec.Cmd
	done    chan struct{} // closed once the process has exited and been reaped
	waitErr error         // the exit status; read only after done is closed
}

// startProcess starts binary name from binDir with args, its stdout and
// stderr going to <logDir>/<name>.log.
func startProcess(binDir, logDir, name string, args ...string) (*process, error) {
	logFile, err := openLog(logDir, name)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(binDir, name), args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, logPath: logFile.Name(), binDir: binDir, args: args, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// pid returns the operating-system process id.
func (p *process) pid() int {
	return p.cmd.Process.Pid
}

// exited returns an error describing the exit, with the log tail, if the
// process has exited; nil while it runs.
func (p *process) exited() error {
	select {
	case <-p.done:
		return p.failure(fmt.Errorf("%s exited unexpectedly: %v", p.name, p.waitErr))
	default:
		return nil
	}
}

// failure wraps err with the tail of the process log.
func (p *process) failure(err error) error {
	return fmt.Errorf("%w\n--- last lines of %s ---\n%s", err, p.logPath, logTail(p.logPath))
}

// stop sends SIGTERM, kills the process if it has not exited after
// stopGrace, and waits until it is reaped.
func (p *process) stop() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("sending SIGTERM to %s: %w", p.name, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(stopGrace):
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("killing %s: %w", p.name, err)
	}
	<-p.done
	return nil
}

// logPath returns the path of the log file of component name.
func logPath(dir, name string) string {
	return filepath.Join(dir, name+".log")
}

// openLog opens the log file of component name for appending, so that the
// logs of a reused Dir accumulate.
func openLog(dir, name string) (*os.File, error) {
	f, err := os.OpenFile(logPath(dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening log file of %s: %w", name, err)
	}
	return f, nil
}

// logTail returns the last lines of the file at path, at most logTailBytes.
func logTail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	if len(data) > logTailBytes {
		data = data[len(data)-logTailBytes:]
		if i := strings.IndexByte(string(data), '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	if len(data) == 0 {
		return "(empty)"
	}
	return strings.TrimRight(string(data), "\n")
}
