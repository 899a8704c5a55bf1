package plugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
)

// runOnce starts the process, shakes hands, publishes the connection and
// waits for the process to exit (an error saying how) or for ctx to end
// (the process is stopped, nil).
func (p *Plugin) runOnce(ctx context.Context) error {
	// A directory of our own (0700: os.MkdirTemp), so no other user can
	// reach the socket.
	dir, err := os.MkdirTemp("", Prefix+p.opts.Name+"-")
	if err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	defer os.RemoveAll(dir)
	socket := filepath.Join(dir, "plugin.sock")

	// The plugin's stdin is a pipe the engine never writes to: when the
	// engine dies, however, the plugin reads EOF and stops.
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("stdin pipe: %w", err)
	}
	defer stdinW.Close()
	stderr := &lineLogger{log: p.log}
	defer stderr.flush()

	cmd := exec.Command(p.opts.Path)
	cmd.Env = append(append(os.Environ(), p.opts.Env...), EnvSocket+"="+socket, fmt.Sprintf("%s=%d", EnvProtocol, ProtocolVersion))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, stderr, stderr
	cmd.SysProcAttr = sysProcAttr()
	cmd.WaitDelay = p.opts.StopTimeout
	if err := cmd.Start(); err != nil {
		stdinR.Close()
		return fmt.Errorf("starting %s: %w", p.opts.Path, err)
	}
	stdinR.Close()
	proc := &process{cmd: cmd, exited: make(chan struct{})}
	go func() { proc.err = cmd.Wait(); close(proc.exited) }()

	conn, err := p.connect(ctx, socket, proc)
	if err != nil {
		proc.stop(p.opts.StopTimeout)
		return err
	}
	defer conn.Close()
	p.publish(conn, cmd.Process.Pid)
	p.log.Info("provider plugin up", "path", p.opts.Path, "pid", cmd.Process.Pid)

	// The watch is owned here: it ends with this run, before it returns.
	wctx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	var hung error
	go func() { defer close(watched); hung = p.watch(wctx, conn) }()
	defer func() { stopWatch(); <-watched }()

	select {
	case <-proc.exited:
		err := exitError(proc.err)
		p.setDown(err)
		return err
	case <-watched:
		if hung == nil { // ctx ended
			return p.stopped(conn, proc)
		}
		// Hung: no new calls; the ones in flight fail as the connection
		// closes. SIGKILL, since a stopped process does not act on SIGTERM,
		// to the whole group, so nothing it started lives on.
		err := fmt.Errorf("killed: %w", hung)
		p.setDown(err)
		conn.Close()
		proc.killGroup()
		return err
	case <-ctx.Done():
		return p.stopped(conn, proc)
	}
}

// stopped stops the plugin as the engine stops: no new calls, the ones in
// flight finished, the connection closed; the plugin then stops at once on
// SIGTERM.
func (p *Plugin) stopped(conn *grpc.ClientConn, proc *process) error {
	p.setDown(errors.New("stopped"))
	p.drain(p.opts.StopTimeout)
	conn.Close()
	proc.stop(p.opts.StopTimeout)
	p.log.Info("provider plugin stopped", "path", p.opts.Path)
	return nil
}

// connect dials the socket and shakes hands, until StartTimeout, ctx's end
// or the process's exit, whichever comes first.
func (p *Plugin) connect(ctx context.Context, socket string, proc *process) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient("unix://"+socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(codec{})),
		// The socket appears a few milliseconds after the start: retry
		// soon, not after gRPC's default second.
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second}}))
	if err != nil {
		return nil, fmt.Errorf("dialing %s: %w", socket, err)
	}
	hctx, cancel := context.WithTimeout(ctx, p.opts.StartTimeout)
	defer cancel()
	go func() {
		select {
		case <-proc.exited:
			cancel()
		case <-hctx.Done():
		}
	}()
	var resp handshakeResponse
	// WaitForReady: the socket appears when the plugin listens.
	err = conn.Invoke(hctx, fullMethod(methodHandshake), &handshakeRequest{ProtocolVersion: ProtocolVersion, Name: p.opts.Name}, &resp, grpc.WaitForReady(true))
	switch {
	case err != nil && proc.hasExited():
		conn.Close()
		return nil, fmt.Errorf("%s before the handshake", exitError(proc.err))
	case err != nil && ctx.Err() == nil:
		conn.Close()
		return nil, fmt.Errorf("no handshake within %s: %w", p.opts.StartTimeout, err)
	case err != nil:
		conn.Close()
		return nil, ctx.Err()
	case resp.ProtocolVersion != ProtocolVersion:
		conn.Close()
		return nil, fmt.Errorf("%s speaks plugin protocol %d, this engine %d: install the plugin built with this engine", p.opts.Path, resp.ProtocolVersion, ProtocolVersion)
	case resp.Name != p.opts.Name:
		conn.Close()
		return nil, fmt.Errorf("%s serves provider %q, not %q", p.opts.Path, resp.Name, p.opts.Name)
	}
	return conn, nil
}

// process is a started plugin: err is cmd.Wait's, set when exited closes.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

func (p *process) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// stop asks the process to stop (SIGTERM) and kills it if it has not
// exited after timeout.
func (p *process) stop(timeout time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// killGroup kills the process and its process group (sysProcAttr made
// it the group's leader) and waits for it.
func (p *process) killGroup() {
	_ = killGroup(p.cmd.Process.Pid)
	_ = p.cmd.Process.Kill()
	<-p.exited
}

func exitError(err error) error {
	if err == nil {
		return errors.New("exited with status 0")
	}
	return fmt.Errorf("exited: %w", err)
}

// lineLogger writes a process's output to the log, a line an entry.
type lineLogger struct {
	log logr.Logger
	mu  sync.Mutex
	buf []byte
}

// maxLine bounds what is kept of a line without an end.
const maxLine = 16 << 10

func (l *lineLogger) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, b...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.emit(l.buf[:i])
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) > maxLine {
		l.emit(l.buf)
		l.buf = nil
	}
	return len(b), nil
}

func (l *lineLogger) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.emit(l.buf)
		l.buf = nil
	}
}

func (l *lineLogger) emit(line []byte) {
	line = bytes.TrimRight(line, "\r")
	if len(line) == 0 {
		return
	}
	l.log.Info("provider plugin output", "line", string(line))
}
