package pgserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"
)

// AdminUser is the superuser of every cluster Start creates.
const AdminUser = "admin"

// InstallHint is the command that installs the binaries Start needs.
const InstallHint = "bash hack/postgres.sh install (as root: apt-get install -y postgresql-15)"

// ErrNotInstalled is returned by Start when initdb and pg_ctl are missing.
var ErrNotInstalled = errors.New("PostgreSQL server binaries (initdb, pg_ctl) not found on PATH or in /usr/lib/postgresql/*/bin; install them with: " + InstallHint)

// Server is one running throwaway cluster.
type Server struct {
	// Host and Port are where it listens (TCP, loopback).
	Host string
	Port int
	// User and Password are the superuser's.
	User     string
	Password string

	dir    string
	pgCtl  string
	cred   *syscall.Credential
	logOut string
}

// Options tune Start.
type Options struct {
	// Log receives progress lines; nil discards them.
	Log func(format string, args ...any)
}

// Start creates and starts a cluster, and waits until it accepts
// connections (pg_ctl -w). ctx bounds the whole start.
func Start(ctx context.Context, opts Options) (*Server, error) {
	logf := opts.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	cred, err := runAs()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgserver-")
	if err != nil {
		return nil, fmt.Errorf("creating the cluster directory: %w", err)
	}
	s := &Server{Host: "127.0.0.1", User: AdminUser, Password: randomHex(16), dir: dir, pgCtl: filepath.Join(bin, "pg_ctl"), cred: cred}
	s.logOut = filepath.Join(dir, "server.log")
	ok := false
	defer func() {
		if !ok {
			_ = os.RemoveAll(dir)
		}
	}()
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("handing the cluster directory to the postgres user: %w", err)
		}
	}
	pwfile := filepath.Join(dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(s.Password+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("writing the password file: %w", err)
	}
	if cred != nil {
		if err := os.Chown(pwfile, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("handing the password file to the postgres user: %w", err)
		}
	}
	data := filepath.Join(dir, "data")
	logf("pgserver: initdb in %s", data)
	if err := s.run(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", AdminUser, "--pwfile", pwfile,
		"--auth=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		return nil, err
	}
	_ = os.Remove(pwfile)
	if s.Port, err = freePort(); err != nil {
		return nil, err
	}
	logf("pgserver: starting on %s:%d", s.Host, s.Port)
	serverOpts := fmt.Sprintf("-c listen_addresses=%s -c port=%d -c unix_socket_directories=%s -c fsync=off -c max_connections=200",
		s.Host, s.Port, dir)
	if err := s.run(ctx, s.pgCtl, "-D", data, "-l", s.logOut, "-o", serverOpts, "-w", "-t", "60", "start"); err != nil {
		return nil, err
	}
	ok = true
	logf("pgserver: ready on %s:%d (user %s)", s.Host, s.Port, s.User)
	return s, nil
}

// Stop stops the server (fast shutdown) and removes its directory.
func (s *Server) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := s.run(ctx, s.pgCtl, "-D", filepath.Join(s.dir, "data"), "-m", "fast", "-w", "stop")
	if rerr := os.RemoveAll(s.dir); err == nil && rerr != nil {
		err = fmt.Errorf("removing the cluster directory: %w", rerr)
	}
	return err
}

// DSN is a connection URI for the superuser, to the postgres database.
func (s *Server) DSN() string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(s.User, s.Password),
		Host: net.JoinHostPort(s.Host, strconv.Itoa(s.Port)), Path: "/postgres", RawQuery: "sslmode=disable"}
	return u.String()
}

// Env is the server's admin connection as libpq's environment variables.
func (s *Server) Env() map[string]string {
	return map[string]string{
		"PGHOST": s.Host, "PGPORT": strconv.Itoa(s.Port), "PGUSER": s.User,
		"PGPASSWORD": s.Password, "PGSSLMODE": "disable", "PGDATABASE": "postgres",
	}
}

// Log returns the server's log file, for a failing test to print.
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.logOut)
	return string(b)
}

// run runs a PostgreSQL command, as the postgres user when we are root.
func (s *Server) run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), args[len(args)-1], err, out.String())
	}
	return nil
}

// BinDir finds the directory of initdb and pg_ctl: PATH first, then the
// newest /usr/lib/postgresql/<version>/bin (Debian keeps them off PATH).
func BinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "pg_ctl")); err == nil {
			return dir, nil
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Slice(matches, func(i, j int) bool { return versionOf(matches[i]) > versionOf(matches[j]) })
	for _, m := range matches {
		dir := filepath.Dir(m)
		if _, err := os.Stat(filepath.Join(dir, "pg_ctl")); err == nil {
			return dir, nil
		}
	}
	return "", ErrNotInstalled
}

func versionOf(initdb string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return v
}

// runAs is the credential to run the server with: the postgres user's
// when we are root (PostgreSQL refuses root), nil otherwise.
func runAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, PostgreSQL needs the postgres user (created by the postgresql-15 package; %s): %w", InstallHint, err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
