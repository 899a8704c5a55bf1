package postgresql

import (
	"os"
	"testing"

	"github.com/cuengine/engine/internal/pgserver"
)

// pg is the package's PostgreSQL, started by the first test that needs it.
var pg pgserver.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	pg.Stop()
	os.Exit(code)
}
