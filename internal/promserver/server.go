// Package promserver runs a throwaway Prometheus server (Debian's
// `prometheus` package, `make prometheus` installs it) for the tests that
// read metrics as a user's Prometheus would: it scrapes the targets it is
// given every second, and can require basic authentication on its API.
package promserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// Options configures Start.
type Options struct {
	// Targets are host:port addresses scraped every second at /metrics.
	Targets []string
	// Username and Password, when set, are required on every API call
	// (Prometheus' --web.config.file basic_auth_users).
	Username, Password string
	// Listen is the host:port to serve on; "" is a free port on
	// 127.0.0.1. A server stopped and started again on the same Listen is
	// at the same URL, as a restarted Prometheus is.
	Listen string
	// Log receives progress lines; nil is silent.
	Log func(format string, args ...any)
}

// Server is a running Prometheus.
type Server struct {
	// URL is the server's address, as a client is given it.
	URL string
	dir string
	cmd *exec.Cmd
	out *os.File
}

// Binary finds the prometheus binary, or says how to install it.
func Binary() (string, error) {
	if p, err := exec.LookPath("prometheus"); err == nil {
		return p, nil
	}
	return "", errors.New("prometheus not found: run `make prometheus` (as root: apt-get install prometheus)")
}

// Start starts a server and returns once it is ready.
func Start(ctx context.Context, opts Options) (*Server, error) {
	logf := opts.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "promserver-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir}
	fail := func(err error) (*Server, error) {
		return nil, errors.Join(err, s.Stop())
	}
	var targets []string
	for _, t := range opts.Targets {
		targets = append(targets, fmt.Sprintf("%q", t))
	}
	config := fmt.Sprintf("global: {scrape_interval: 1s, evaluation_interval: 1s}\nscrape_configs:\n- job_name: test\n  static_configs:\n  - targets: [%s]\n", strings.Join(targets, ", "))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o600); err != nil {
		return fail(err)
	}
	addr := opts.Listen
	if addr == "" {
		port, err := freePort()
		if err != nil {
			return fail(err)
		}
		addr = fmt.Sprintf("127.0.0.1:%d", port)
	}
	args := []string{
		"--config.file=" + filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr,
	}
	if opts.Username != "" {
		hash, err := bcrypt.GenerateFromPassword([]byte(opts.Password), bcrypt.MinCost)
		if err != nil {
			return fail(err)
		}
		web := fmt.Sprintf("basic_auth_users:\n  %s: %s\n", opts.Username, hash)
		if err := os.WriteFile(filepath.Join(dir, "web.yml"), []byte(web), 0o600); err != nil {
			return fail(err)
		}
		args = append(args, "--web.config.file="+filepath.Join(dir, "web.yml"))
	}
	s.out, err = os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		return fail(err)
	}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	started := time.Now()
	logf("promserver: starting %s on %s", bin, addr)
	if err := s.cmd.Start(); err != nil {
		return fail(err)
	}
	s.URL = "http://" + addr
	if err := s.waitReady(ctx, opts); err != nil {
		return fail(fmt.Errorf("%w; its log:\n%s", err, s.logTail()))
	}
	logf("promserver: ready in %s", time.Since(started).Round(time.Millisecond))
	return s, nil
}

// waitReady polls /-/ready until it answers 200.
func (s *Server) waitReady(ctx context.Context, opts Options) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/-/ready", nil)
		if err != nil {
			return err
		}
		if opts.Username != "" {
			req.SetBasicAuth(opts.Username, opts.Password)
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("prometheus not ready within a minute: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "prometheus.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Stop stops the server and removes its directory.
func (s *Server) Stop() error {
	var err error
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- s.cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-done
		}
	}
	if s.out != nil {
		s.out.Close()
	}
	return errors.Join(err, os.RemoveAll(s.dir))
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
