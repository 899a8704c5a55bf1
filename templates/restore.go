package templates

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"cuelang.org/go/cue/cuecontext"
)

// Files returns the template's sources, by path relative to the templates
// directory: its own files and the packages it may import (cue.mod, nested
// packages). They are what a revision stores; Restore compiles them back
// into the same template, with the same Hash.
func (t *Template) Files() map[string]string { return maps.Clone(t.files) }

// Restore compiles the template at path (relative, as Template.Path) from
// the files Files returned, without the directory they came from: a stored
// revision of a template that the directory may no longer hold.
func Restore(path string, files map[string]string) (*Template, error) {
	root, err := os.MkdirTemp("", "engine-revision-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(root)
	for name, content := range files {
		full := filepath.Join(root, filepath.FromSlash(name))
		if !strings.HasPrefix(full, root+string(filepath.Separator)) {
			return nil, fmt.Errorf("revision file %q is outside the templates directory", name)
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			return nil, err
		}
	}
	sources, err := discover(root)
	if err != nil {
		return nil, err
	}
	for _, src := range sources {
		if src.path == path {
			c := &compiler{root: root, ctx: cuecontext.New()}
			// Positions in errors stay relative to root, as they were in
			// the directory; nothing reads the files after the compile.
			return c.compile(src)
		}
	}
	return nil, fmt.Errorf("revision holds no template %s", path)
}
