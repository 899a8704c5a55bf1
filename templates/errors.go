package templates

import (
	"errors"
	"fmt"
	"path/filepath"
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
	return &Error{Template: tmpl, Problems: []Problem{{Pos: position(c.root, v.Pos()), Path: path, Msg: fmt.Sprintf(format, args...)}}}
}

// fromCUE converts a CUE error into an *Error with positions relative to root.
func fromCUE(root, tmpl string, err error) *Error {
	out := &Error{Template: tmpl}
	seen := map[string]bool{}
	for _, e := range cueerrors.Errors(err) {
		format, args := e.Msg()
		p := Problem{Path: strings.Join(e.Path(), "."), Msg: fmt.Sprintf(format, args...)}
		p.Pos = position(root, e.Position())
		if p.Pos == "" {
			for _, ip := range e.InputPositions() {
				if s := position(root, ip); s != "" {
					p.Pos = s
					break
				}
			}
		}
		// Also name the other places that take part in a conflict.
		var others []string
		for _, ip := range e.InputPositions() {
			if s := position(root, ip); s != "" && s != p.Pos && !contains(others, s) {
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

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
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
