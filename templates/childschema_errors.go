package templates

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/format"
	"cuelang.org/go/cue/token"
)

// mismatchedTypes is the note CUE adds to a conflict of kinds, which says
// the same thing again.
var mismatchedTypes = regexp.MustCompile(` \(mismatched types [^)]*\)`)

// childProblems turns the conflicts of child with its kind's schema into
// problems a template's author can act on: at the line of the child's field
// in the template, under the path from the template's root, saying what the
// schema wants and what the template gives and, when the value comes from
// an expression (parent.spec.tier), which one and where it is declared:
//
//	mykind.cue:23:13: children.deployment.spec.replicas: conflicting values int32 and string (parent.spec.tier, mykind.cue:12:3)
//
// crd says the kind is a CRD's, whose schema's CUE says itself where null
// is taken (openapi/cue.go); a built-in kind takes a null field or map
// value as the zero value (nullAccepted).
func childProblems(root, name string, crd bool, def, child cue.Value, err error) []Problem {
	prefix := "children." + cue.MakePath(cue.Str(name)).String()
	errs := cueerrors.Errors(err)
	var out []Problem
	seen := map[string]bool{}
	for i := 0; i < len(errs); i++ {
		e := errs[i]
		segs := e.Path()
		if len(segs) > 0 && strings.HasPrefix(segs[0], "#") {
			segs = segs[1:] // the schema's #kind
		}
		if !crd && nullAccepted(child, segs) {
			for i+1 < len(errs) && strings.Join(errs[i+1].Path(), ".") == strings.Join(e.Path(), ".") {
				i++ // the branches of a disjunction the null fits none of
			}
			continue
		}
		key := strings.Join(segs, ".")
		msg := errorText(e)
		inputs := append([]token.Pos{e.Position()}, e.InputPositions()...)
		if emptyDisjunction.MatchString(msg) {
			var branches []cueerrors.Error
			for i+1 < len(errs) && strings.Join(errs[i+1].Path(), ".") == strings.Join(e.Path(), ".") {
				i++
				branches = append(branches, errs[i])
				inputs = append(inputs, errs[i].InputPositions()...)
			}
			msg = disjunctionText(branches)
		}
		if m := schemaConflict(def, child, segs); m != "" && msg != "field not allowed" {
			msg = m
		}
		p := Problem{Path: prefix, Msg: msg}
		if key != "" {
			p.Path += "." + key
		}
		var expr string
		if msg == "field not allowed" {
			// The field's own label, the first of its positions, is the
			// place to fix.
			sort.SliceStable(inputs, func(i, j int) bool { return inputs[i].Offset() < inputs[j].Offset() })
			for _, ip := range inputs {
				if p.Pos = position(root, ip); p.Pos != "" {
					break
				}
			}
			inputs = nil
		} else {
			p.Pos, expr = fieldSource(root, lookupSegments(child, segs))
		}
		var others []string
		for _, ip := range inputs {
			if s := position(root, ip); s != "" && s != p.Pos && !slices.Contains(others, s) {
				others = append(others, s)
			}
		}
		if p.Pos == "" && len(others) > 0 {
			p.Pos, others = others[0], others[1:]
		}
		switch {
		case expr != "":
			if decl := declaration(root, lookupSegments(child, segs)); decl != "" {
				others = []string{decl}
			}
			p.Msg += " (" + strings.Join(append([]string{expr}, others...), ", ") + ")"
		case len(others) > 0:
			p.Msg += " (see " + strings.Join(others, ", ") + ")"
		}
		if !seen[p.String()] {
			seen[p.String()] = true
			out = append(out, p)
		}
	}
	return out
}

// nullAccepted reports whether the apiserver accepts the child's null at
// segs although the schema of a built-in kind does not say null: a field
// of an object or a value of a map may be null, which the apiserver
// decodes as the field's zero value, as if absent. An item of a list stays
// null and is refused. (A CRD's object is another matter: the apiserver
// refuses a null unless the schema says nullable or has a default, which
// its CUE says itself, openapi/cue.go; TestChildSchemasAgreeWithTheAPIServer
// asks a real one.)
func nullAccepted(child cue.Value, segs []string) bool {
	if len(segs) == 0 {
		return false
	}
	if v := lookupSegments(child, segs); !v.IsConcrete() || v.Kind() != cue.NullKind {
		return false
	}
	_, err := strconv.Atoi(segs[len(segs)-1])
	return err != nil || lookupSegments(child, segs[:len(segs)-1]).IncompleteKind() != cue.ListKind
}

// errorText is the error's message without CUE's repetitions.
func errorText(e cueerrors.Error) string {
	format, args := e.Msg()
	return mismatchedTypes.ReplaceAllString(fmt.Sprintf(format, args...), "")
}

// disjunctionText says why no branch of a schema's disjunction (an enum,
// int-or-string) accepts the value: the value and the allowed ones.
func disjunctionText(branches []cueerrors.Error) string {
	var allowed []string
	value := ""
	for _, b := range branches {
		m := conflicting.FindStringSubmatch(errorText(b))
		if m == nil {
			return errorText(b)
		}
		// CUE names the two sides in either order; the side all branches
		// share is the template's value.
		a, z := m[1], m[2]
		switch {
		case value == "" && len(branches) > 1:
			next := conflicting.FindStringSubmatch(errorText(branches[1]))
			if next != nil && (next[1] == a || next[2] == a) {
				value, allowed = a, append(allowed, z)
			} else {
				value, allowed = z, append(allowed, a)
			}
		case a == value:
			allowed = append(allowed, z)
		default:
			allowed = append(allowed, a)
		}
	}
	if value == "" {
		return "no allowed value matches"
	}
	sort.Strings(allowed)
	return fmt.Sprintf("invalid value %s (must be one of %s)", value, strings.Join(allowed, ", "))
}

// lookupSegments follows an error's path in the child: list indices where
// the value is a list, field names elsewhere.
func lookupSegments(v cue.Value, segs []string) cue.Value {
	for _, s := range segs {
		if n, err := strconv.Atoi(s); err == nil && v.IncompleteKind() == cue.ListKind {
			v = v.LookupPath(cue.MakePath(cue.Index(n)))
			continue
		}
		v = v.LookupPath(cue.MakePath(cue.Str(s)))
	}
	return v
}

// fieldSource returns where the template writes a field's value and, when
// that value is a reference (parent.spec.tier), the reference.
func fieldSource(root string, v cue.Value) (pos, expr string) {
	if !v.Exists() {
		return "", ""
	}
	src := v.Source()
	if f, ok := src.(*ast.Field); ok {
		src = f.Value
	}
	if src != nil {
		pos = position(root, src.Pos())
		switch src.(type) {
		case *ast.Ident, *ast.SelectorExpr, *ast.IndexExpr:
			if b, err := format.Node(src); err == nil {
				expr = string(b)
			}
		}
	}
	if pos == "" {
		pos = position(root, v.Pos())
	}
	return pos, expr
}

// schemaConflict says what the schema wants at a path and what the
// template gives, "" when it cannot tell: "conflicting values int32 and
// string", or for an enum or int-or-string "invalid value "gold" | "silver"
// (must be one of "Always", "Never", "OnFailure")". CUE's own message
// names the two sides in either order, and for a value from a disjunction
// it lists every pair of branches.
func schemaConflict(def, child cue.Value, segs []string) string {
	want, got := lookupSchema(def, segs), lookupSegments(child, segs)
	if !want.Exists() || !got.Exists() {
		return ""
	}
	gives := describe(got)
	if op, args := want.Expr(); op == cue.OrOp {
		var allowed []string
		for _, a := range args {
			allowed = append(allowed, fmt.Sprint(a))
		}
		sort.Strings(allowed)
		return fmt.Sprintf("invalid value %s (must be one of %s)", gives, strings.Join(allowed, ", "))
	}
	if want.IncompleteKind()&^cue.BottomKind == cue.StructKind || want.IncompleteKind() == cue.ListKind {
		return "" // CUE's message says which field
	}
	return fmt.Sprintf("conflicting values %v and %s", want, gives)
}

// describe is a template's value as a message shows it: a concrete value
// or a set of them ("gold" | "silver") as written, anything else by its
// type (string, not strings.MinRunes(1) & strings.MaxRunes(64)).
func describe(v cue.Value) string {
	if v.IsConcrete() {
		return fmt.Sprint(v)
	}
	if op, args := v.Eval().Expr(); op == cue.OrOp {
		concrete := true
		for _, a := range args {
			concrete = concrete && a.IsConcrete()
		}
		if concrete {
			return fmt.Sprint(v)
		}
	}
	return (v.IncompleteKind() &^ cue.BottomKind).String()
}

// lookupSchema follows a path in a schema: list elements and the values of
// free-form maps by their patterns.
func lookupSchema(v cue.Value, segs []string) cue.Value {
	for _, s := range segs {
		if _, err := strconv.Atoi(s); err == nil && v.IncompleteKind() == cue.ListKind {
			v = v.LookupPath(cue.MakePath(cue.AnyIndex))
			continue
		}
		if f := v.LookupPath(cue.MakePath(cue.Str(s).Optional())); f.Exists() {
			v = f
			continue
		}
		v = v.LookupPath(cue.MakePath(cue.AnyString))
	}
	return v
}

// declaration returns where the field a reference points to is declared
// (parent.spec.tier's "tier: ..."), or "".
func declaration(root string, v cue.Value) string {
	r, path := v.ReferencePath()
	if len(path.Selectors()) == 0 {
		return ""
	}
	return position(root, r.LookupPath(path).Pos())
}
