package templates

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"cuelang.org/go/cue"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/token"
)

// Problem is one error a user can act on: where it is and what is wrong.
type Problem struct {
	// Pos is "file:line:col" relative to the templates directory, or "" when
	// CUE knows no position (for example for a value that came from the parent).
	Pos string
	// Path is the CUE path of the offending value, such as
	// "parent.spec.replicas", or "" when the error is not about one value.
	Path string
	// Msg says what is wrong.
	Msg string
}

func (p Problem) String() string {
	var b strings.Builder
	if p.Pos != "" {
		b.WriteString(p.Pos)
		b.WriteString(": ")
	}
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Error is the error of a template that does not load, compile or evaluate.
// It lists every problem found, each with its position and CUE path.
type Error struct {
	// Template is the template's path relative to the templates directory.
	Template string
	// Problems are sorted by position and never empty.
	Problems []Problem
}

func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Summary returns at most max problems on one line, for a condition message.
func (e *Error) Summary(max int) string {
	var parts []string
	for i, p := range e.Problems {
		if i == max {
			parts = append(parts, fmt.Sprintf("and %d more", len(e.Problems)-max))
			break
		}
		parts = append(parts, p.String())
	}
	return strings.Join(parts, "; ")
}

// Summary returns a one-line description of err for a status condition: the
// first problems of an *Error, or err's text.
func Summary(err error, max int) string {
	var te *Error
	if errors.As(err, &te) {
		return te.Summary(max)
	}
	return err.Error()
}

// problemf builds an Error with one problem at the position of v.
func (c *compiler) problemf(tmpl string, v cue.Value, path string, format string, args ...any) *Error {
	return &Error{Template: tmpl, Problems: []Problem{{Pos: userPos(c.root, v), Path: path, Msg: fmt.Sprintf(format, args...)}}}
}

// position formats a position in the user's files, relative to the
// templates directory (position).
func (c *compiler) position(pos token.Pos) string { return position(c.root, pos) }

// userPos returns the position of v in the user's files: its own, or that of
// its first field when v itself starts in the engine's contract.
func userPos(root string, v cue.Value) string {
	if p := position(root, v.Pos()); p != "" {
		return p
	}
	if it, err := v.Fields(cue.Optional(true)); err == nil {
		for it.Next() {
			if p := position(root, it.Value().Pos()); p != "" {
				return p
			}
		}
	}
	return ""
}

// fromCUE converts a CUE error into an *Error with positions relative to
// root. scope, when given, is the value the error's paths are in: a problem
// CUE reports without a position gets the position of that path's
// declaration in the template.
func fromCUE(root, tmpl string, err error, scope ...cue.Value) *Error {
	out := &Error{Template: tmpl}
	seen := map[string]bool{}
	for _, g := range groupDisjunctions(cueerrors.Errors(err)) {
		p := Problem{Path: g.path, Msg: g.msg, Pos: g.pos(root)}
		if p.Pos == "" && p.Path != "" && len(scope) > 0 {
			p.Pos = userPos(root, scope[0].LookupPath(cue.ParsePath(p.Path)))
		}
		// Also name the other places that take part in a conflict.
		var others []string
		for _, ip := range g.inputs {
			if s := position(root, ip); s != "" && s != p.Pos && !slices.Contains(others, s) {
				others = append(others, s)
			}
		}
		if len(others) > 0 {
			p.Msg += " (see " + strings.Join(others, ", ") + ")"
		}
		key := p.String()
		if seen[key] {
			continue
		}
		seen[key] = true
		out.Problems = append(out.Problems, p)
	}
	if len(out.Problems) == 0 {
		out.Problems = []Problem{{Msg: err.Error()}}
	}
	return out
}

// problemGroup is one reported problem made of one or more CUE errors.
type problemGroup struct {
	path     string
	msg      string
	position token.Pos
	inputs   []token.Pos
}

func (g problemGroup) pos(root string) string {
	if s := position(root, g.position); s != "" {
		return s
	}
	for _, ip := range g.inputs {
		if s := position(root, ip); s != "" {
			return s
		}
	}
	return ""
}

var (
	emptyDisjunction = regexp.MustCompile(`^\d+ errors in empty disjunction:?$`)
	conflicting      = regexp.MustCompile(`^conflicting values (.+) and (.+)$`)
)

// groupDisjunctions turns CUE's "N errors in empty disjunction" followed by
// one error per failed branch into a single problem a user can read: the
// branch that says why the value is wrong, or the list of allowed values.
func groupDisjunctions(errs []cueerrors.Error) []problemGroup {
	var out []problemGroup
	for i := 0; i < len(errs); i++ {
		e := errs[i]
		format, args := e.Msg()
		msg := fmt.Sprintf(format, args...)
		path := strings.Join(e.Path(), ".")
		if !emptyDisjunction.MatchString(msg) {
			out = append(out, problemGroup{path: path, msg: msg, position: e.Position(), inputs: e.InputPositions()})
			continue
		}
		var branches []cueerrors.Error
		for i+1 < len(errs) && strings.Join(errs[i+1].Path(), ".") == path {
			i++
			branches = append(branches, errs[i])
		}
		out = append(out, summarize(path, branches))
	}
	return out
}

func summarize(path string, branches []cueerrors.Error) problemGroup {
	var allowed []string
	var value string
	var inputs []token.Pos
	for _, b := range branches {
		format, args := b.Msg()
		msg := fmt.Sprintf(format, args...)
		m := conflicting.FindStringSubmatch(msg)
		if m == nil {
			// A real constraint failed (a bound, a length): that is the reason;
			// the other branches are only the default not matching.
			return problemGroup{path: path, msg: msg, position: b.Position(), inputs: b.InputPositions()}
		}
		allowed = append(allowed, m[1])
		value = m[2]
		inputs = append(inputs, b.InputPositions()...)
	}
	if len(allowed) == 0 {
		return problemGroup{path: path, msg: "no allowed value matches"}
	}
	sort.SliceStable(inputs, func(i, j int) bool { return inputs[i].Offset() < inputs[j].Offset() })
	sort.Strings(allowed)
	return problemGroup{path: path, msg: fmt.Sprintf("invalid value %s (must be one of %s)", value, strings.Join(allowed, ", ")), inputs: inputs}
}

// position formats a CUE position as file:line:col relative to root. Positions
// inside the engine's own contract file are not the user's and are dropped.
func position(root string, pos token.Pos) string {
	if !pos.IsValid() || pos.Filename() == "" {
		return ""
	}
	if filepath.Base(pos.Filename()) == contractFile {
		return ""
	}
	return fmt.Sprintf("%s:%d:%d", rel(root, pos.Filename()), pos.Line(), pos.Column())
}

// recovered, deferred, turns a panic inside CUE or the engine's own walks of
// a template into an error at the template's file, so that no input can
// take the process down: a reload keeps the last good set, a parent gets
// the error in its conditions. CUE has panicked on valid input (cue/format
// on a bare comprehension, issue 51); the stack goes to the error so that
// the bug can be reported, the process goes on.
func recovered(tmpl, stage string, err *error) {
	r := recover()
	if r == nil {
		return
	}
	*err = &Error{Template: tmpl, Problems: []Problem{{
		Msg: fmt.Sprintf("internal error while %s (a bug in CUE or the engine, not in the template; the engine goes on without it): %v", stage, r),
	}}}
}

// recoveredWarning is recovered for vet's warnings: a panic is one more
// warning, never an exit.
func recoveredWarning(tmpl, stage string, out *[]string) {
	if r := recover(); r != nil {
		*out = append(*out, fmt.Sprintf("%s: internal error while %s (a bug in CUE or the engine): %v", tmpl, stage, r))
	}
}
