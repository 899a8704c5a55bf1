package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"

	"github.com/cuengine/engine/diff"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

// The files of a case directory.
const (
	caseParent   = "parent.yaml"
	caseObserved = "observed.yaml"
	caseWant     = "want.yaml"
	caseExpect   = "expect.cue"
	// caseConverted is the parent in another version of its kind, as the
	// apiserver would serve it (testversions.go).
	caseConverted = "converted.yaml"
)

// pathError is the field of expect.cue that states an expected error.
var pathError = cue.ParsePath("error")

// runCase runs one case: the parent is admitted as the apiserver would admit
// it, rendered with the observed state, and the outcome compared with
// want.yaml and expect.cue.
func (o *testOptions) runCase(set *templates.Set, t *templates.Template, c testCase) caseResult {
	start := time.Now()
	r := caseResult{testCase: c}
	r.logs, r.failure = o.check(set, t, c)
	r.elapsed = time.Since(start)
	return r
}

// check returns the case's logs and its failure, "" when it passes.
func (o *testOptions) check(set *templates.Set, t *templates.Template, c testCase) (logs []string, failure string) {
	file := func(name string) string { return filepath.Join(c.dir, name) }
	rel := func(name string) string { return relTo(set.Root, file(name)) }
	parents, err := readObjects(file(caseParent), nil)
	if err != nil {
		return nil, err.Error()
	}
	if len(parents) != 1 {
		return nil, fmt.Sprintf("%s: want one custom resource, found %d", rel(caseParent), len(parents))
	}
	parent := parents[0]
	given0 := parent                                                            // as the case gives it, in any version of the kind
	if parent, failure = caseInHub(t, parent, rel(caseParent)); failure != "" { // testversions.go
		return nil, failure
	}
	var given render.Given
	if exists(file(caseObserved)) {
		if given, err = readObserved(file(caseObserved)); err != nil {
			return nil, err.Error()
		}
	}
	expect, hasExpect, err := readExpectation(set.Root, file(caseExpect))
	if err != nil {
		return nil, err.Error()
	}
	hasWant := exists(file(caseWant))

	// What the apiserver would store, then what the engine renders from it.
	if parent.GetNamespace() == "" && t.CRD().Spec.Scope != "Cluster" {
		parent.SetNamespace("default")
	}
	var rendered *rendering
	stored, pruned, evalErr := t.Admit(parent)
	for _, p := range pruned {
		logs = append(logs, fmt.Sprintf("warning: %s: unknown field %q dropped (not in the schema of %s), as the apiserver drops it", rel(caseParent), p, t.Path))
	}
	if evalErr == nil {
		rendered, evalErr = renderParent(set, stored, given, render.Options{Limits: o.limits, Budget: o.budget})
		evalErr = advise(evalErr, func(string) string { return caseParent })
	}

	var failures []string
	if exists(file(caseConverted)) {
		if msg := checkConverted(t, given0, file(caseConverted), rel(caseConverted)); msg != "" { // testversions.go
			failures = append(failures, msg)
		}
	}
	if hasExpect {
		if msg := checkExpectation(set.Root, expect, rendered, evalErr); msg != "" {
			failures = append(failures, rel(caseExpect)+": "+msg)
		}
	}
	wantErr := hasExpect && expect.LookupPath(pathError).Exists()
	switch {
	case evalErr != nil && !wantErr:
		failures = append(failures, "the parent does not render:\n"+evalErr.Error())
	case wantErr && hasWant:
		failures = append(failures, rel(caseWant)+": a case that expects an error has no rendering to compare")
	case evalErr != nil:
	case hasWant || (o.update && !hasExpect):
		var got bytes.Buffer
		if err := rendered.write(&got); err != nil {
			return logs, err.Error()
		}
		msg, note := o.checkGolden(file(caseWant), rel(caseWant), got.Bytes())
		if note != "" {
			logs = append(logs, note)
		}
		if msg != "" {
			failures = append(failures, msg)
		}
	case !hasExpect:
		failures = append(failures, fmt.Sprintf("no expectation: add %s (engine test --update writes it) or %s", caseWant, caseExpect))
	}
	return logs, strings.Join(failures, "\n")
}

// checkGolden compares the rendering with want.yaml, or rewrites it with
// --update. It returns a failure, "" when it matches, and a note.
func (o *testOptions) checkGolden(path, rel string, got []byte) (failure, note string) {
	want, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err.Error(), ""
	}
	if bytes.Equal(want, got) {
		return "", ""
	}
	if o.update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			return err.Error(), ""
		}
		return "", "updated " + rel
	}
	text := diff.Unified(rel+" (want)", "rendered (got)", string(want), string(got))
	return rel + " differs from the rendering (engine test --update rewrites it):\n" + text, ""
}

// readExpectation compiles expect.cue, if the case has one.
func readExpectation(root, path string) (cue.Value, bool, error) {
	src, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return cue.Value{}, false, nil
	}
	if err != nil {
		return cue.Value{}, false, err
	}
	v := cuecontext.New().CompileBytes(src, cue.Filename(path))
	if err := v.Err(); err != nil {
		return cue.Value{}, false, errors.New(cueDetails(root, err))
	}
	return v, true, nil
}

// checkExpectation unifies expect.cue with the outcome: the expected error
// with the error's text, or the rest with {children, resources, status,
// ready}. It returns a failure, "" when the outcome satisfies it.
func checkExpectation(root string, expect cue.Value, r *rendering, evalErr error) string {
	ctx := cuecontext.New()
	if ev := expect.LookupPath(pathError); ev.Exists() {
		it, _ := expect.Fields()
		for it.Next() {
			if it.Selector().String() != "error" {
				return fmt.Sprintf("a case that expects an error states nothing else (found %s)", it.Selector())
			}
		}
		if evalErr == nil {
			return fmt.Sprintf("want an error matching %s, but the parent rendered without one", describe(ev))
		}
		text := evalErr.Error()
		if want, err := ev.String(); err == nil {
			if !strings.Contains(text, want) {
				return fmt.Sprintf("the error does not contain %q; it is:\n%s", want, text)
			}
			return ""
		}
		if err := ev.Unify(ctx.Encode(text)).Validate(cue.Concrete(true)); err != nil {
			return fmt.Sprintf("the error does not match %s; it is:\n%s", describe(ev), text)
		}
		return ""
	}
	if evalErr != nil {
		return "" // reported once, by the caller
	}
	actual := ctx.Encode(outcome(r))
	unified := expect.Unify(actual)
	if err := unified.Validate(cue.Concrete(true)); err != nil {
		return "the output does not satisfy the expectation:\n" + cueDetails(root, err)
	}
	if missing := absent(unified, actual, nil); len(missing) > 0 {
		return "the output lacks what the expectation states:\n" + strings.Join(missing, "\n")
	}
	return ""
}

// outcome is what expect.cue is unified with.
func outcome(r *rendering) map[string]any {
	children := map[string]any{}
	for i, c := range r.result.Children {
		children[c.Name] = r.children[i].Object
	}
	resources := map[string]any{}
	for _, res := range r.result.Resources {
		resources[res.Name] = res.Document()
	}
	status := r.result.Status
	if status == nil {
		status = map[string]any{}
	}
	out := map[string]any{"children": children, "resources": resources, "status": status}
	if r.result.Ready != nil {
		out["ready"] = *r.result.Ready
	}
	return out
}

// absent lists the regular fields and list elements of v that actual lacks:
// what the expectation states and the output does not have, which
// unification alone would just add.
func absent(v, actual cue.Value, path []cue.Selector) []string {
	var out []string
	switch v.Kind() {
	case cue.StructKind:
		it, err := v.Fields()
		if err != nil {
			return nil
		}
		for it.Next() {
			p := append(append([]cue.Selector{}, path...), it.Selector())
			if !actual.LookupPath(cue.MakePath(p...)).Exists() {
				out = append(out, fmt.Sprintf("%s: not in the output (want %s)", cue.MakePath(p...), describe(it.Value())))
				continue
			}
			out = append(out, absent(it.Value(), actual, p)...)
		}
	case cue.ListKind:
		it, err := v.List()
		if err != nil {
			return nil
		}
		for i := 0; it.Next(); i++ {
			out = append(out, absent(it.Value(), actual, append(append([]cue.Selector{}, path...), cue.Index(i)))...)
		}
	}
	return out
}

// describe prints a value on one line, at most 100 characters.
func describe(v cue.Value) string {
	s := strings.Join(strings.Fields(fmt.Sprint(v)), " ")
	if len(s) > 100 {
		s = s[:97] + "..."
	}
	return s
}

// cueDetails prints a CUE error with its paths, messages and positions
// relative to root.
func cueDetails(root string, err error) string {
	return strings.TrimRight(cueerrors.Details(err, &cueerrors.Config{Cwd: root}), "\n")
}

func relTo(root, path string) string {
	if r, err := filepath.Rel(root, path); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return path
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
