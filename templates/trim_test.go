package templates

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/cuengine/engine/templates/reads"
)

// everything is a reads.Set that keeps all: evaluation with it hands CUE the
// whole parent and the whole observed state.
var everything = reads.Set{All: true}

// TestTrimmingChangesNothing is the differential test of templates/reads: every
// template of the repository that has `engine test` cases (examples/templates
// and every templates directory under a testdata/, testdata/corpus/
// included) is evaluated with each case's parent and observed state twice,
// once as the engine does (trimmed to what the template reads) and once
// with everything, and the two must give the same children, resources,
// status and ready, or the same error. As engine test does, the live objects
// of observed.yaml are matched to the children rendered so far, rendering
// again until no new child matches.
func TestTrimmingChangesNothing(t *testing.T) {
	dirs := templateDirsWithCases(t)
	require.Contains(t, dirs, filepath.Clean(examples))
	require.Contains(t, dirs, filepath.Join("testdata", "trim"))
	cases := 0
	for _, dir := range dirs {
		set, err := Load(dir)
		require.NoError(t, err, dir)
		for _, tm := range set.Templates() {
			caseDirs, _ := filepath.Glob(filepath.Join(dir, "tests", tm.Name, "*", "parent.yaml"))
			for _, p := range caseDirs {
				c := filepath.Dir(p)
				cases++
				t.Run(c, func(t *testing.T) { compareTrimmed(t, tm, c) })
			}
		}
	}
	assert.GreaterOrEqual(t, cases, 10, "the cases found")
}

// templateDirsWithCases lists examples/templates and every directory
// under a testdata/ of the repository that holds a tests/ of cases.
func templateDirsWithCases(t *testing.T) []string {
	dirs := []string{filepath.Clean(examples)}
	for _, root := range []string{"testdata", filepath.Join("..", "testdata"), filepath.Join("..", "engine", "testdata"), filepath.Join("..", "render", "testdata")} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if d.IsDir() && d.Name() == "tests" {
				dirs = append(dirs, filepath.Dir(path))
				return filepath.SkipDir
			}
			return nil
		})
		require.NoError(t, err)
	}
	return dirs
}

// compareTrimmed evaluates one case trimmed and whole, to a fixed point of
// the live objects matched to children.
func compareTrimmed(t *testing.T, tm *Template, dir string) {
	parents := readDocs(t, filepath.Join(dir, "parent.yaml"))
	require.Len(t, parents, 1)
	parent := &unstructured.Unstructured{Object: parents[0]}
	if parent.GetNamespace() == "" && tm.CRD().Spec.Scope != "Cluster" {
		parent.SetNamespace("default")
	}
	stored, _, err := tm.Admit(parent)
	if err != nil {
		return // refused before any evaluation: nothing is trimmed
	}
	observed := map[string]any{}
	var live []*unstructured.Unstructured
	if _, err := os.Stat(filepath.Join(dir, "observed.yaml")); err == nil {
		for _, d := range readDocs(t, filepath.Join(dir, "observed.yaml")) {
			u := &unstructured.Unstructured{Object: d}
			if u.GetAPIVersion() == "" || u.GetKind() == "" {
				maps.Copy(observed, d)
				continue
			}
			if items, ok := d["items"].([]any); ok && strings.HasSuffix(u.GetKind(), "List") {
				for _, it := range items {
					live = append(live, &unstructured.Unstructured{Object: it.(map[string]any)})
				}
				continue
			}
			live = append(live, u)
		}
	}
	addReferences(t, tm, stored, live, observed)
	for round := 0; ; round++ {
		require.Less(t, round, 10, "no fixed point")
		in := Input{Parent: stored, Observed: observed}
		trimmed, trimmedErr := tm.Evaluate(in)
		whole, wholeErr := tm.evaluate(in, everything, everything, nil)
		if wholeErr != nil || trimmedErr != nil {
			require.Error(t, trimmedErr, "trimmed evaluates, whole fails: %v", wholeErr)
			require.Error(t, wholeErr, "whole evaluates, trimmed fails: %v", trimmedErr)
			assert.Equal(t, wholeErr.Error(), trimmedErr.Error())
			return
		}
		trimmed.Remembered = false
		require.Equal(t, whole, trimmed, "round %d", round)
		next := maps.Clone(observed)
		for _, c := range whole.Children {
			for _, l := range live {
				if l.GetAPIVersion() == c.Object.GetAPIVersion() && l.GetKind() == c.Object.GetKind() && l.GetName() == c.Object.GetName() {
					next[c.Name] = l.Object
				}
			}
		}
		if reflect.DeepEqual(next, observed) {
			return
		}
		observed = next
	}
}

// addReferences puts into observed the live objects the template's
// references select, as engine test does offline: a reference without a
// namespace is in the parent's.
func addReferences(t *testing.T, tm *Template, parent *unstructured.Unstructured, live []*unstructured.Unstructured, observed map[string]any) {
	if !tm.HasReferences() {
		return
	}
	refs, err := tm.References(parent)
	if err != nil {
		return // the evaluations report it, both
	}
	for _, ref := range refs {
		if _, given := observed[ref.Name]; given {
			continue
		}
		ns := ref.Namespace
		if ns == "" {
			ns = parent.GetNamespace()
		}
		var items []any
		for _, l := range live {
			switch {
			case l.GroupVersionKind() != ref.GVK || l.GetNamespace() != ns && l.GetNamespace() != "":
			case ref.ByName() && l.GetName() == ref.ObjectName:
				observed[ref.Name] = l.Object
			case !ref.ByName() && labels.SelectorFromSet(ref.Selector).Matches(labels.Set(l.GetLabels())):
				items = append(items, l.Object)
			}
		}
		if !ref.ByName() {
			observed[ref.Name] = map[string]any{"items": items}
		}
	}
}

// readDocs reads the documents of a multi-document YAML file, with whole
// numbers as int64, as engine test reads them.
func readDocs(t *testing.T, path string) []map[string]any {
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []map[string]any
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		js, err := yaml.YAMLToJSON(doc)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, utiljson.Unmarshal(js, &m))
		if len(m) > 0 {
			out = append(out, m)
		}
	}
}
