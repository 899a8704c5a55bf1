package templates

import (
	"fmt"
	"sort"
	"strings"

	"cuelang.org/go/cue"

	"github.com/cuengine/engine/contract"
)

// Fields left to other writers: a child's ownership field maps a dotted
// field path of the child to a mode, contract.OwnershipCreateOnly or
// contract.OwnershipShared. The engine takes the field out of the child
// before applying it (render carries it in contract.AnnotationOwnership).
//
//	children: app: {
//		apiVersion: "apps/v1"
//		kind:       "Deployment"
//		...
//		ownership: {"spec.replicas": "CreateOnly", "metadata.annotations": "Shared"}
//	}

// fieldOwnership is the field of a child that lists its fields left to
// other writers.
const fieldOwnership = "ownership"

// ownershipOf reads a child's exported ownership field: the modes by path,
// or the path under the child and a message saying what is wrong.
func ownershipOf(raw any) (modes map[string]string, path, msg string) {
	if raw == nil {
		return nil, "", ""
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, fieldOwnership, fmt.Sprintf(`must be a map of field path to %q or %q, such as {"spec.replicas": %q}`,
			contract.OwnershipCreateOnly, contract.OwnershipShared, contract.OwnershipCreateOnly)
	}
	modes = make(map[string]string, len(m))
	paths := make([]string, 0, len(m))
	for p := range m {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		at := fieldOwnership + "." + quoteLabel(p)
		mode, _ := m[p].(string)
		if mode != contract.OwnershipCreateOnly && mode != contract.OwnershipShared {
			return nil, at, fmt.Sprintf("must be %q or %q, not %s", contract.OwnershipCreateOnly, contract.OwnershipShared, describeJSON(m[p]))
		}
		if msg := checkOwnedPath(p, mode); msg != "" {
			return nil, at, msg
		}
		for _, q := range paths {
			if q != p && strings.HasPrefix(p, q+".") {
				return nil, at, fmt.Sprintf("is inside %q, which is listed too: list one of them", q)
			}
		}
		modes[p] = mode
	}
	return modes, "", ""
}

// checkOwnedPath says what is wrong with a path of the ownership field,
// "" when nothing is.
func checkOwnedPath(p, mode string) string {
	segs := strings.Split(p, ".")
	for _, s := range segs {
		switch {
		case s == "":
			return "is not a field path: write fields separated by dots, such as \"spec.replicas\""
		case strings.ContainsAny(s, "[]"):
			return "names a list item: a path goes through fields only (a list is left to others whole, or not at all)"
		case strings.ContainsAny(s, ",= \t\n"):
			return "is not a field path: a field name holds no comma, equals sign or space"
		}
	}
	switch {
	case segs[0] == "apiVersion" || segs[0] == "kind" || segs[0] == "status":
		return "is not a field the template may leave to others"
	case segs[0] == "metadata" && mode == contract.OwnershipCreateOnly:
		return "metadata is the engine's and the template's: mark metadata.labels or metadata.annotations \"Shared\" to keep other writers' keys"
	case segs[0] == "metadata" && (len(segs) != 2 || segs[1] != "labels" && segs[1] != "annotations"):
		return "of the metadata, only metadata.labels and metadata.annotations may be \"Shared\""
	}
	return ""
}

// quoteLabel is a path of the ownership field as a CUE label.
func quoteLabel(p string) string {
	return fmt.Sprintf("%q", p)
}

// describeJSON is an exported value as a message shows it.
func describeJSON(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprint(v)
}

// checkOwnership refuses, at its line, a child's ownership field that is
// not a map of valid paths to modes.
func (t *Template) checkOwnership(cv cue.Value, path string, raw any) error {
	_, at, msg := ownershipOf(raw)
	if msg == "" {
		return nil
	}
	v := cv.LookupPath(cue.ParsePath(at))
	if !v.Exists() {
		v = cv.LookupPath(cue.MakePath(cue.Str(fieldOwnership)))
	}
	return &Error{Template: t.Path, Problems: []Problem{{Pos: userPos(t.root, v), Path: path + "." + at, Msg: msg}}}
}

// checkOwnershipSchema checks a child's ownership paths against the
// kind's schema def: each path must be a field of the kind, and a Shared
// one a map. A value not concrete before a parent exists is not checked
// here; evaluation checks it.
func checkOwnershipSchema(root, name string, def, child cue.Value) []Problem {
	own := child.LookupPath(cue.MakePath(cue.Str(fieldOwnership)))
	if !own.Exists() {
		return nil
	}
	it, err := own.Fields()
	if err != nil {
		return nil
	}
	var problems []Problem
	for it.Next() {
		p, v := it.Selector().Unquoted(), it.Value()
		at := "children." + name + "." + fieldOwnership + "." + quoteLabel(p)
		pos := userPos(root, v)
		mode, err := v.String()
		if err != nil {
			if v.IsConcrete() {
				problems = append(problems, Problem{Pos: pos, Path: at, Msg: fmt.Sprintf("must be %q or %q, not %v", contract.OwnershipCreateOnly, contract.OwnershipShared, v)})
			}
			continue
		}
		_, _, msg := ownershipOf(map[string]any{p: mode})
		if msg != "" {
			problems = append(problems, Problem{Pos: pos, Path: at, Msg: msg})
			continue
		}
		segs := strings.Split(p, ".")
		s := def
		for i, seg := range segs {
			f := s.LookupPath(cue.MakePath(cue.Str(seg).Optional()))
			if !f.Exists() {
				f = s.LookupPath(cue.MakePath(cue.AnyString))
			}
			if !f.Exists() {
				msg = fmt.Sprintf("%s is not a field of %s", strings.Join(segs[:i+1], "."), kindOf(child))
				break
			}
			s = f
		}
		if msg == "" && mode == contract.OwnershipShared && (s.IncompleteKind()&cue.StructKind == 0 || !s.LookupPath(cue.MakePath(cue.AnyString)).Exists()) {
			msg = fmt.Sprintf("%s is not a map of %s: only a map (such as metadata.annotations) can be %q", p, kindOf(child), contract.OwnershipShared)
		}
		if msg != "" {
			problems = append(problems, Problem{Pos: pos, Path: at, Msg: msg})
		}
	}
	return problems
}

// kindOf is a child's kind as a message names it.
func kindOf(child cue.Value) string {
	k, _ := child.LookupPath(cue.ParsePath("kind")).String()
	return k
}
