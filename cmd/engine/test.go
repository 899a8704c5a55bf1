package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

type testOptions struct {
	templates string
	run       string
	verbose   bool
	junit     string
	update    bool
	limits    render.Limits
	// budget is the run's one render.Budget: cases that render the same
	// object over a limit evaluate it once.
	budget *render.Budget
	crds   []string
}

func newTestCommand() *cobra.Command {
	o := &testOptions{}
	cmd := &cobra.Command{
		Use:   "test",
		Short: "Run the templates' test cases offline: golden files and CUE expectations",
		Long: `Test runs the test cases of the templates, without a cluster. The cases of
template mykind.cue (or of the subdirectory template mykind/) live in
tests/mykind/<case>/ under the templates directory, which the engine never
loads as a template. A case directory holds:

  parent.yaml    the custom resource (with the uid, generation or
                 creationTimestamp the template reads: the apiserver gives
                 every object one)
  observed.yaml  optional: live children (Kubernetes objects, matched by
                 apiVersion, kind and name) and maps of local name to the
                 observation of an external resource, as for engine render:
                 rendered again until the matches settle
  want.yaml      golden file: what engine render prints (--update rewrites it)
  expect.cue     partial expectation, unified with the output
                 {children, resources, status, ready}; or an expected error:
                 error: "substring" (or any CUE constraint, such as =~"regexp")

The parent is first checked as the apiserver would check it against the CRD
the template generates: unknown fields are dropped with a warning, defaults
applied, and an invalid object is refused with the apiserver's message.

Exit status: 0 when every case passes, 1 otherwise.`,
		// Parsed below, so that -run works as it does for go test (pflag
		// reads a single dash as shorthands: -r -u -n).
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cmd.Flags().Parse(goTestFlags(args)); err != nil {
				return &exitError{code: 2, msg: err.Error()}
			}
			if help, _ := cmd.Flags().GetBool("help"); help {
				return cmd.Help()
			}
			if rest := cmd.Flags().Args(); len(rest) > 0 {
				return &exitError{code: 2, msg: fmt.Sprintf("unexpected arguments %q", rest)}
			}
			return o.runTests(cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolP("help", "h", false, "help for test")
	cmd.Flags().StringVar(&o.templates, "templates", "templates", "templates directory")
	addCRDsFlag(cmd.Flags(), &o.crds)
	cmd.Flags().StringVar(&o.run, "run", "", "run only the cases whose name (template/case) matches this regular expression")
	cmd.Flags().BoolVarP(&o.verbose, "verbose", "v", false, "print every case as it starts, and the warnings of passing cases")
	cmd.Flags().StringVar(&o.junit, "junit", "", "also write a JUnit XML report to this file")
	addLimitFlags(cmd.Flags(), &o.limits)
	cmd.Flags().BoolVar(&o.update, "update", false, "rewrite the want.yaml of every case run (and write one for a case with no expectation)")
	return cmd
}

// goTestFlags accepts go test's spelling of the long flags, -run and
// -update, by rewriting them as --run and --update.
func goTestFlags(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		for _, long := range []string{"run", "update", "junit", "templates", "verbose"} {
			if a == "-"+long || strings.HasPrefix(a, "-"+long+"=") {
				out[i] = "-" + a
			}
		}
	}
	return out
}

// testCase is one case directory: tests/<template>/<case>/.
type testCase struct {
	template string // the template's name: "mykind"
	name     string // the case's directory name
	dir      string
}

func (c testCase) fullName() string { return c.template + "/" + c.name }

// caseResult is the outcome of one case.
type caseResult struct {
	testCase
	elapsed time.Duration
	logs    []string // warnings and notes, shown on failure or with -v
	failure string   // why the case failed; "" when it passed
}

func (o *testOptions) runTests(stdout io.Writer) error {
	var filter *regexp.Regexp
	if o.run != "" {
		var err error
		if filter, err = regexp.Compile(o.run); err != nil {
			return &exitError{code: 1, msg: fmt.Sprintf("-run: %v", err)}
		}
	}
	start := time.Now()
	if o.budget == nil {
		o.budget = render.NewBudget(render.BudgetLimits{})
	}
	set, broken, err := o.load(stdout)
	if err != nil {
		return err
	}
	cases, orphans, err := discoverCases(set)
	if err != nil {
		return &exitError{code: 1, msg: err.Error()}
	}
	var results []caseResult
	// The cases of a template that does not load fail with its errors
	// (a schema error of a child, a compile error); the others run.
	orphans, failing, err := casesOfBroken(orphans, broken)
	if err != nil {
		return &exitError{code: 1, msg: err.Error()}
	}
	for _, c := range failing {
		if filter == nil || filter.MatchString(c.fullName()) {
			results = append(results, c)
			o.report(stdout, c)
		}
	}
	for _, c := range orphans {
		if filter == nil || filter.MatchString(c.fullName()) {
			results = append(results, caseResult{testCase: c, failure: fmt.Sprintf(
				"%s has no template: no %s.cue or %s/ template in %s", filepath.Join(templates.TestsDir, c.template), c.template, c.template, o.templates)})
			o.report(stdout, results[len(results)-1])
		}
	}
	byName := map[string]*templates.Template{}
	for _, t := range set.Templates() {
		byName[t.Name] = t
	}
	for _, c := range cases {
		if filter != nil && !filter.MatchString(c.fullName()) {
			continue
		}
		if o.verbose {
			fmt.Fprintf(stdout, "=== RUN   %s\n", c.fullName())
		}
		r := o.runCase(set, byName[c.template], c)
		results = append(results, r)
		o.report(stdout, r)
	}
	failed := 0
	for _, r := range results {
		if r.failure != "" {
			failed++
		}
	}
	elapsed := time.Since(start)
	switch {
	case len(results) == 0 && filter != nil:
		fmt.Fprintf(stdout, "ok    %s  no case matches -run %q (%.2fs)\n", o.templates, o.run, elapsed.Seconds())
	case len(results) == 0:
		fmt.Fprintf(stdout, "ok    %s  no test cases in %s (%.2fs)\n", o.templates, filepath.Join(o.templates, templates.TestsDir), elapsed.Seconds())
	case failed == 0:
		fmt.Fprintf(stdout, "PASS\nok    %s  %s (%.2fs)\n", o.templates, plural(len(results), "case"), elapsed.Seconds())
	default:
		fmt.Fprintf(stdout, "FAIL\nFAIL  %s  %d of %s failed (%.2fs)\n", o.templates, failed, plural(len(results), "case"), elapsed.Seconds())
	}
	if o.junit != "" {
		if err := writeJUnit(o.junit, results, elapsed); err != nil {
			return &exitError{code: 1, msg: fmt.Sprintf("--junit: %v", err)}
		}
	}
	if failed > 0 {
		return &exitError{code: 1}
	}
	return nil
}

// report prints one case's line, then its failure and logs, indented.
func (o *testOptions) report(w io.Writer, r caseResult) {
	verdict := "PASS"
	if r.failure != "" {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "--- %s: %s (%.2fs)\n", verdict, r.fullName(), r.elapsed.Seconds())
	if r.failure == "" && !o.verbose {
		return
	}
	for _, l := range r.logs {
		fmt.Fprintln(w, indent(l))
	}
	if r.failure != "" {
		fmt.Fprintln(w, indent(r.failure))
	}
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = "    " + l
		}
	}
	return strings.Join(lines, "\n")
}

// discoverCases lists the case directories under tests/, sorted: those of a
// template, and those under a directory that names no template (orphans,
// which fail). Entries starting with "." or "_" are skipped.
func discoverCases(set *templates.Set) (cases, orphans []testCase, err error) {
	root := filepath.Join(set.Root, templates.TestsDir)
	tmplDirs, err := os.ReadDir(root)
	if os.IsNotExist(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading test cases: %w", err)
	}
	known := map[string]bool{}
	for _, t := range set.Templates() {
		known[t.Name] = true
	}
	for _, td := range tmplDirs {
		if hiddenEntry(td.Name()) || !isDir(filepath.Join(root, td.Name())) {
			continue
		}
		if !known[td.Name()] {
			orphans = append(orphans, testCase{template: td.Name(), name: "*", dir: filepath.Join(root, td.Name())})
			continue
		}
		entries, err := os.ReadDir(filepath.Join(root, td.Name()))
		if err != nil {
			return nil, nil, fmt.Errorf("reading test cases: %w", err)
		}
		for _, e := range entries {
			dir := filepath.Join(root, td.Name(), e.Name())
			if !hiddenEntry(e.Name()) && isDir(dir) {
				cases = append(cases, testCase{template: td.Name(), name: e.Name(), dir: dir})
			}
		}
	}
	sort.Slice(cases, func(i, j int) bool { return cases[i].fullName() < cases[j].fullName() })
	return cases, orphans, nil
}

func hiddenEntry(name string) bool {
	return strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

func isDir(path string) bool {
	info, err := os.Stat(path) // follows symlinks
	return err == nil && info.IsDir()
}

// load loads the templates for engine test. When some do not load, the
// others are returned with the errors of the broken ones by template name,
// so their cases fail and every other case runs.
func (o *testOptions) load(stdout io.Writer) (*templates.Set, map[string]*templates.Error, error) {
	set, err := loadOffline(o.templates, o.crds, stdout)
	if err == nil {
		return set, nil, nil
	}
	var le *templates.LoadError
	if !errors.As(err, &le) || le.Loaded == nil {
		return nil, nil, asExitError(err)
	}
	broken := map[string]*templates.Error{}
	for _, te := range le.Errors {
		broken[strings.TrimSuffix(filepath.ToSlash(te.Template), ".cue")] = te
	}
	for _, u := range le.Loaded.Unchecked() {
		fmt.Fprintf(stdout, "warning: %s\n", u)
	}
	return le.Loaded, broken, nil
}

// casesOfBroken turns the orphans that belong to a broken template into
// failed results, one per case, and returns the real orphans.
func casesOfBroken(orphans []testCase, broken map[string]*templates.Error) (rest []testCase, failed []caseResult, err error) {
	for _, c := range orphans {
		te, ok := broken[c.template]
		if !ok {
			rest = append(rest, c)
			continue
		}
		entries, err := os.ReadDir(c.dir)
		if err != nil {
			return nil, nil, fmt.Errorf("reading test cases: %w", err)
		}
		for _, e := range entries {
			if hiddenEntry(e.Name()) || !isDir(filepath.Join(c.dir, e.Name())) {
				continue
			}
			tc := testCase{template: c.template, name: e.Name(), dir: filepath.Join(c.dir, e.Name())}
			failed = append(failed, caseResult{testCase: tc, failure: "the template does not load:\n" + te.Error()})
		}
	}
	return rest, failed, nil
}
