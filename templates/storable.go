package templates

import (
	"encoding/json"
	"fmt"
)

// MaxStoredBytes bounds what a template's files may take as the revision
// that stores them (a ControllerRevision's data, as JSON). etcd refuses a
// request over 1.5 MiB (its default --max-request-bytes), and a revision
// carries its metadata and the apiserver's encoding beside the files: a
// quarter of a MiB is left for them.
const MaxStoredBytes = 1<<20 + 1<<18 // 1.25 MiB

// StoredSize is what files take as a revision stores them: {"files":
// {path: content}} as JSON, the encoding of package revisions.
func StoredSize(files map[string]string) int {
	b, _ := json.Marshal(struct {
		Files map[string]string `json:"files"`
	}{files}) // a map of strings: it cannot fail
	return len(b)
}

// StoreError is why the template cannot be stored as a revision (too
// large), or nil. Load refuses such a template (LoadError.Servable keeps
// it apart); a template restored from a revision never is.
func (t *Template) StoreError() error { return t.storeErr }

// storable refuses files too large to store as one revision.
func storable(path string, files map[string]string) error {
	size := StoredSize(files)
	if size <= MaxStoredBytes {
		return nil
	}
	return &Error{Template: path, Problems: []Problem{{Pos: path, Msg: fmt.Sprintf(
		"the template's files take %d bytes (%.2f MiB) as a stored revision, more than the %d (%.2f MiB) allowed: etcd refuses requests over 1.5 MiB, and a ControllerRevision holds the files with its metadata; make the files smaller",
		size, float64(size)/(1<<20), MaxStoredBytes, float64(MaxStoredBytes)/(1<<20))}}}
}
