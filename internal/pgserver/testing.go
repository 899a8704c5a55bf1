package pgserver

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

// Main runs a test package's tests with one server for the whole package,
// from TestMain: under -short it runs them without one (they skip, as
// control-plane tests do); without the binaries it fails with the command
// that installs them, never skipping silently. set receives the server
// before the tests run.
func Main(m *testing.M, set func(*Server)) int {
	if testing.Short() {
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	s, err := Start(ctx, Options{Log: func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting PostgreSQL for the tests: %v\n", err)
		return 1
	}
	set(s)
	code := m.Run()
	if err := s.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping PostgreSQL: %v\n", err)
	}
	return code
}
