package localcluster

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

const (
	// modulePath is the module whose root holds bin/.
	modulePath = "github.com/cuengine/engine"
	// assetsEnv overrides the binaries directory, as for envtest.
	assetsEnv = "KUBEBUILDER_ASSETS"
	// buildHint tells the user how to get the binaries.
	buildHint = "run `make assets` in the repository root to build them"
)

// AssetsDir returns the directory holding the control-plane binaries:
// $KUBEBUILDER_ASSETS if set, else the bin directory of the repository root,
// found by walking up from the working directory to the go.mod of module
// github.com/cuengine/engine. It fails, naming `make assets`, when
// kube-apiserver is not in that directory.
func AssetsDir() (string, error) {
	dir := os.Getenv(assetsEnv)
	if dir == "" {
		root, err := repoRoot()
		if err != nil {
			return "", fmt.Errorf("finding control-plane binaries (set %s or %s): %w", assetsEnv, buildHint, err)
		}
		dir = filepath.Join(root, "bin")
	}
	if err := requireBinaries(dir, "kube-apiserver"); err != nil {
		return "", err
	}
	return dir, nil
}

// requireBinaries checks that each named binary is an executable file in dir.
func requireBinaries(dir string, names ...string) error {
	for _, name := range names {
		path := filepath.Join(dir, name)
		info, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("control-plane binary %s not found in %s (%s): %w", name, dir, buildHint, err)
		}
		if info.IsDir() || info.Mode().Perm()&0o111 == 0 {
			return fmt.Errorf("control-plane binary %s is not executable (%s)", path, buildHint)
		}
	}
	return nil
}

// repoRoot walks up from the working directory to the directory whose go.mod
// declares modulePath.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("getting working directory: %w", err)
	}
	for {
		ok, err := declaresModule(filepath.Join(dir, "go.mod"))
		if err != nil {
			return "", err
		}
		if ok {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of module %s above the working directory", modulePath)
		}
		dir = parent
	}
}

// declaresModule reports whether the go.mod at path declares modulePath. A
// missing file is not an error.
func declaresModule(path string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("opening %s: %w", path, err)
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) == 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`) == modulePath, nil
		}
	}
	if err := scanner.Err(); err != nil {
		return false, fmt.Errorf("reading %s: %w", path, err)
	}
	return false, nil
}
