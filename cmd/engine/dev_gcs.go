package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// gcsEmulatorBinary is the Cloud Storage emulator `engine dev` starts
// (cmd/engine-gcs-emulator, built beside the engine by make build): a
// process of its own, so that the engine links no Cloud Storage code.
const gcsEmulatorBinary = "engine-gcs-emulator"

// devEmulator is a running engine-gcs-emulator.
type devEmulator struct {
	cmd   *exec.Cmd
	stdin io.Closer
	host  string
}

// startGCSEmulator starts the emulator found beside the engine and returns
// once it has said where it listens.
func startGCSEmulator() (*devEmulator, error) {
	dir, err := engineDir()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, gcsEmulatorBinary)
	cmd := exec.Command(path)
	// The emulator stops when its stdin closes: when engine dev ends,
	// however it ends.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w (make build builds it beside the engine)", err)
	}
	e := &devEmulator{cmd: cmd, stdin: stdin}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case line, ok := <-lines:
		if !ok || strings.TrimSpace(line) == "" {
			e.stop()
			return nil, errors.New(path + " exited without an address")
		}
		e.host = strings.TrimSpace(line)
	case <-time.After(30 * time.Second):
		e.stop()
		return nil, errors.New(path + " did not start within 30s")
	}
	return e, nil
}

// stop ends the emulator: its stdin closes, it stops and exits.
func (e *devEmulator) stop() {
	_ = e.stdin.Close()
	done := make(chan struct{})
	go func() { _ = e.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = e.cmd.Process.Kill()
		<-done
	}
}
