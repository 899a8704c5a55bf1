package templates

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"cuelang.org/go/cue"
)

// The template's readiness: its top-level ready, a bool or a struct with
// a reason and message for the parent's Ready condition, and each child's
// readyWhen, which replaces the kind's own readiness for that child.

var pathReadyWhen = cue.ParsePath(fieldReadyWhen)

// The fields of ready's struct form: {ok: false, reason: "NoQuorum",
// message: "2 of 3 members"}.
var readyFields = []string{"ok", "reason", "message"}

// conditionReason is the form of a condition's reason (metav1.Condition).
var conditionReason = regexp.MustCompile(`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`)

const readyForm = `must be a bool, or {ok: bool, reason?: string, message?: string}`

// checkReady refuses, at compile time and at its line, a ready that can
// never be one of its two forms.
func (c *compiler) checkReady(path string, v cue.Value) error {
	rv := v.LookupPath(pathReady)
	if !rv.Exists() {
		return nil
	}
	k := rv.IncompleteKind()
	if k == cue.BottomKind || k&cue.BoolKind != 0 {
		return nil // not known until a parent is filled in, or a bool
	}
	if k&cue.StructKind == 0 {
		return c.problemf(path, rv, "ready", "%s, not %v", readyForm, k)
	}
	it, err := rv.Fields(cue.Optional(true))
	if err != nil {
		return fromCUE(c.root, path, err)
	}
	hasOK := false
	for it.Next() {
		name, fv := it.Selector().Unquoted(), it.Value()
		want := cue.StringKind
		switch name {
		case "ok":
			hasOK, want = true, cue.BoolKind
		case "reason", "message":
		default:
			return c.problemf(path, fv, "ready."+name, "is not a field of ready (known: %s)", strings.Join(readyFields, ", "))
		}
		if fk := fv.IncompleteKind(); fk != cue.BottomKind && fk&want == 0 {
			return c.problemf(path, fv, "ready."+name, "must be a %v, not %v", want, fk)
		}
		if s, err := fv.String(); name == "reason" && err == nil && !conditionReason.MatchString(s) {
			return c.problemf(path, fv, "ready.reason", "%q is not a condition reason: a CamelCase word such as \"NoQuorum\"", s)
		}
	}
	if !hasOK {
		return c.problemf(path, rv, "ready.ok", "is missing: ready %s", readyForm)
	}
	return nil
}

// readiness is the template's ready as exported: a bool, or a struct.
type readiness struct {
	ok              bool
	reason, message string
}

// readyOf decodes the template's exported ready.
func (t *Template) readyOf(rv cue.Value, out *rendered) (*readiness, error) {
	var x any
	if _, err := export(t, rv, "ready", &x, out); err != nil {
		return nil, err
	}
	bad := func(path, msg string) error {
		return &Error{Template: t.Path, Problems: []Problem{{Pos: userPos(t.root, rv), Path: path, Msg: msg}}}
	}
	switch x := x.(type) {
	case bool:
		return &readiness{ok: x}, nil
	case map[string]any:
		r := &readiness{}
		for name, f := range x {
			var ok bool
			switch name {
			case "ok":
				r.ok, ok = f.(bool)
			case "reason":
				r.reason, ok = f.(string)
				if ok && r.reason != "" && !conditionReason.MatchString(r.reason) {
					return nil, bad("ready.reason", fmt.Sprintf("%q is not a condition reason: a CamelCase word such as \"NoQuorum\"", r.reason))
				}
			case "message":
				r.message, ok = f.(string)
			default:
				return nil, bad("ready."+name, "is not a field of ready (known: "+strings.Join(readyFields, ", ")+")")
			}
			if !ok {
				return nil, bad("ready."+name, fmt.Sprintf("must be a %s", map[bool]string{true: "bool", false: "string"}[name == "ok"]))
			}
		}
		if _, ok := x["ok"]; !ok {
			return nil, bad("ready.ok", "is missing: ready "+readyForm)
		}
		return r, nil
	}
	return nil, bad("ready", readyForm)
}

// ChildReadiness is what a child's readyWhen says.
type ChildReadiness struct {
	// Ready is readyWhen's value, all its elements true for a list.
	Ready bool
	// Unknown says why readyWhen is not known yet (it reads observed
	// state that does not exist), "" when it is; the child is not ready
	// meanwhile.
	Unknown string
}

// exportChild exports a child. One with a readyWhen is exported field by
// field without it: readyWhen is the engine's, and may not be concrete
// while the child is (it reads the child's own observed state, absent
// until the child exists).
func (t *Template) exportChild(cv cue.Value, path string, obj *map[string]any, out *rendered) ([]byte, *ChildReadiness, error) {
	if !t.readyWhen {
		raw, err := export(t, cv, path, obj, out)
		return raw, nil, err
	}
	rw := cv.LookupPath(pathReadyWhen)
	if !rw.Exists() {
		raw, err := export(t, cv, path, obj, out)
		return raw, nil, err
	}
	it, err := cv.Fields()
	if err != nil {
		return nil, nil, fromCUE(t.root, t.Path, err, t.value)
	}
	m := map[string]any{}
	for it.Next() {
		name := it.Selector().Unquoted()
		if name == fieldReadyWhen {
			continue
		}
		var x any
		if _, err := export(t, it.Value(), path+"."+it.Selector().String(), &x, out); err != nil {
			return nil, nil, err
		}
		m[name] = x
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, nil, &Error{Template: t.Path, Problems: []Problem{{Path: path, Msg: err.Error()}}}
	}
	*obj = m
	r, err := t.readyWhenOf(rw, path+"."+fieldReadyWhen)
	return raw, r, err
}

// readyWhenOf evaluates a child's readyWhen: a bool, or a list of bools
// that must all be true. What is not known yet (an undefined field of
// observed) is not ready, never an error; a value of another kind is.
func (t *Template) readyWhenOf(v cue.Value, path string) (*ChildReadiness, error) {
	bad := &Error{Template: t.Path, Problems: []Problem{{Pos: userPos(t.root, v), Path: path,
		Msg: fmt.Sprintf("must be a bool or a list of bools, not %v", v.IncompleteKind())}}}
	var elems []cue.Value
	switch k := v.IncompleteKind(); {
	case k == cue.BoolKind, k == cue.BottomKind:
		elems = []cue.Value{v}
	case k == cue.ListKind:
		it, err := v.List()
		if err != nil {
			return &ChildReadiness{Unknown: unknownWhy(err)}, nil
		}
		for it.Next() {
			elems = append(elems, it.Value())
		}
	default:
		return nil, bad
	}
	for _, e := range elems {
		b, err := e.Bool()
		if err == nil && !b {
			return &ChildReadiness{}, nil
		}
		if err != nil {
			if k := e.IncompleteKind(); k != cue.BoolKind && k != cue.BottomKind {
				bad.Problems[0].Pos = userPos(t.root, e)
				bad.Problems[0].Msg = fmt.Sprintf("must be a bool or a list of bools, not a list holding %v", k)
				return nil, bad
			}
			return &ChildReadiness{Unknown: unknownWhy(e.Validate(cue.Concrete(true)))}, nil
		}
	}
	return &ChildReadiness{Ready: true}, nil
}

// unknownWhy is the first line of why readyWhen is not known, for the
// parent's Ready message.
func unknownWhy(err error) string {
	if err == nil {
		return "not concrete"
	}
	line, _, _ := strings.Cut(err.Error(), "\n")
	return line
}

// declaresReadyWhen reports whether any file of a template declares a
// readyWhen field: only then does an evaluation look for one.
func declaresReadyWhen(files map[string]string) bool {
	for _, src := range files {
		if strings.Contains(src, fieldReadyWhen) {
			return true
		}
	}
	return false
}
