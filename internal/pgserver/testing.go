package pgserver

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

// Shared is one server for a test package, started by the first test that
// asks for it and stopped from TestMain:
//
//	var pg pgserver.Shared
//	func TestMain(m *testing.M) { code := m.Run(); pg.Stop(); os.Exit(code) }
//	func TestX(t *testing.T) { s := pg.Get(t); ... }
type Shared struct {
	once sync.Once
	s    *Server
	err  error
}

// Get returns the package's server, starting it on first use. Under -short
// the test is skipped, as control-plane tests are; when the binaries are
// missing it fails with the command that installs them, never skipping.
func (sh *Shared) Get(t testing.TB) *Server {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a PostgreSQL server (run without -short)")
	}
	sh.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		sh.s, sh.err = Start(ctx, Options{Log: func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }})
	})
	if sh.err != nil {
		t.Fatalf("starting PostgreSQL: %v", sh.err)
	}
	return sh.s
}

// Stop stops the server if one was started.
func (sh *Shared) Stop() {
	if sh.s == nil {
		return
	}
	if err := sh.s.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping PostgreSQL: %v\n", err)
	}
}
