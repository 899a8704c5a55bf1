package plugin

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// validName is what may follow Prefix: a template's provider name.
var validName = regexp.MustCompile(`^[a-z][a-z0-9]*$`)

// Found is a plugin executable in the provider directory.
type Found struct {
	Name, Path string
}

// Discover lists the plugins in dir: the executable regular files (or
// links to them) named engine-provider-<name>, sorted by name. Other
// files are ignored, so editor backups or a README beside them do no harm.
func Discover(dir string) ([]Found, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("provider directory: %w", err)
	}
	var found []Found
	for _, e := range entries {
		name, ok := strings.CutPrefix(e.Name(), Prefix)
		if !ok || !validName.MatchString(name) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		info, err := os.Stat(path)
		if err != nil || !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
			continue
		}
		found = append(found, Found{Name: name, Path: path})
	}
	sort.Slice(found, func(i, j int) bool { return found[i].Name < found[j].Name })
	return found, nil
}
