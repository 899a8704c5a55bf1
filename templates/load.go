package templates

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"cuelang.org/go/cue/parser"
)

// contractFile is the name of the file the loader adds to every template
// package. It declares the engine-provided top-level fields, so templates can
// refer to observed.<name> without declaring it themselves.
const contractFile = "zz_engine_contract.cue"

// contractCUE declares the fields the engine fills or reads, as open as
// possible: the checks with user-facing messages are done in Go, where the
// error can point at the template's own lines rather than at this file.
const contractCUE = `
parent: {
	apiVersion: string
	kind:       string
	metadata: {...}
	...
}
observed: [string]: _
children: [string]: _
resources: [string]: _
references: [string]: _
status: {...}
`

// TestsDir is the directory, directly under the templates directory, that
// holds the templates' test cases (engine test): tests/<template>/<case>/.
// Load skips it, and the watcher ignores changes under it.
const TestsDir = "tests"

// Skipped reports whether Load ignores a top-level entry of the templates
// directory: hidden entries (".git", and the "..data" links of a Kubernetes
// ConfigMap volume), "_"-prefixed entries and the test cases. cue.mod is not
// a template either, but templates may import from it.
func Skipped(name string) bool {
	return strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == TestsDir
}

// source is one template's files before compiling.
type source struct {
	name  string   // template name: file name without .cue, or directory name
	path  string   // relative to the root: "mykind.cue" or "website"
	files []string // absolute paths of its .cue files, sorted
	hash  string   // sha256 of the names and contents of its files
	// contents are its files and the packages it may import, by path
	// relative to the root: what a revision stores (Template.Files).
	contents map[string]string
	pkg      string // CUE package name ("" when the files have no package clause)
}

// discover lists the templates under root: every top-level .cue file and every
// subdirectory holding .cue files. The entries Skipped names and cue.mod
// are not templates. Symlinks are followed, so ConfigMap-mounted files work.
func discover(root string) ([]source, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("reading templates directory: %w", err)
	}
	var out []source
	for _, e := range entries {
		name := e.Name()
		if Skipped(name) || name == "cue.mod" {
			continue
		}
		full := filepath.Join(root, name)
		info, err := os.Stat(full) // follows symlinks
		if err != nil {
			if os.IsNotExist(err) {
				continue // a dangling link mid-swap; the next rescan sees the new one
			}
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
		switch {
		case info.Mode().IsRegular() && strings.HasSuffix(name, ".cue"):
			out = append(out, source{name: strings.TrimSuffix(name, ".cue"), path: name, files: []string{full}})
		case info.IsDir():
			files, err := cueFiles(full)
			if err != nil {
				return nil, err
			}
			if len(files) > 0 {
				out = append(out, source{name: name, path: name, files: files})
			}
		}
	}
	shared, err := cueFilesUnder(filepath.Join(root, "cue.mod"))
	if err != nil {
		return nil, err
	}
	for i := range out {
		deps := shared
		if len(out[i].files) > 0 && filepath.Dir(out[i].files[0]) != root {
			// Packages nested in a template's directory can be imported by it.
			nested, err := cueFilesUnder(filepath.Dir(out[i].files[0]))
			if err != nil {
				return nil, err
			}
			deps = append(append([]string{}, shared...), nested...)
		}
		if err := out[i].read(root, deps); err != nil {
			return nil, err
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out, nil
}

func cueFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dir, err)
	}
	var files []string
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_") || !strings.HasSuffix(n, ".cue") || n == contractFile {
			continue
		}
		full := filepath.Join(dir, n)
		if info, err := os.Stat(full); err == nil && info.Mode().IsRegular() {
			files = append(files, full)
		}
	}
	sort.Strings(files)
	return files, nil
}

// cueFilesUnder lists every .cue file below dir, recursively, sorted; none
// when dir does not exist.
func cueFilesUnder(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return filepath.SkipDir
			}
			return err
		}
		if d.IsDir() && path != dir && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".cue") {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dir, err)
	}
	sort.Strings(out)
	return out, nil
}

// read hashes the template's files and the packages it may import (deps),
// so an edit of an imported package is a new revision too, and finds the
// package name.
func (s *source) read(root string, deps []string) error {
	h := sha256.New()
	s.contents = map[string]string{}
	for _, f := range deps {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("reading %s: %w", rel(root, f), err)
		}
		io.WriteString(h, rel(root, f))
		h.Write([]byte{0})
		h.Write(b)
		h.Write([]byte{0})
		s.contents[rel(root, f)] = string(b)
	}
	for _, f := range s.files {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("reading %s: %w", rel(root, f), err)
		}
		rp := rel(root, f)
		io.WriteString(h, rp)
		h.Write([]byte{0})
		h.Write(b)
		h.Write([]byte{0})
		s.contents[rp] = string(b)
		if s.pkg == "" {
			// A syntax error is reported by the compile step with its position.
			if af, err := parser.ParseFile(f, b, parser.PackageClauseOnly); err == nil {
				s.pkg = af.PackageName()
			}
		}
	}
	s.hash = hex.EncodeToString(h.Sum(nil))[:12]
	return nil
}

// rel returns path relative to root when it is under root.
func rel(root, path string) string {
	if r, err := filepath.Rel(root, path); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return path
}
