package templates

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/format"
	"cuelang.org/go/cue/load"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates/graph"
	"github.com/cuengine/engine/templates/openapi"
	"github.com/cuengine/engine/templates/policy"
	"github.com/cuengine/engine/templates/reads"
)

// Paths of the template contract, defined once.
var (
	pathParent     = cue.ParsePath("parent")
	pathAPIVersion = cue.ParsePath("parent.apiVersion")
	pathKind       = cue.ParsePath("parent.kind")
	pathSpec       = cue.ParsePath("parent.spec")
	pathChildren   = cue.ParsePath("children")
	pathResources  = cue.ParsePath("resources")
	pathOutStatus  = cue.ParsePath("status")
	pathReady      = cue.ParsePath("ready")
	pathCRD        = cue.ParsePath("crd")
	pathPolicy     = cue.ParsePath("policy")
	pathRollout    = cue.ParsePath("rollout")
)

// Template is one compiled template. It is immutable and safe for concurrent
// use: many reconcile workers evaluate the same Template at once.
type Template struct {
	// Name is the file name without ".cue", or the directory name.
	Name string
	// Path is the file or directory, relative to the templates directory.
	Path string
	// GVK is the parent kind the template watches.
	GVK schema.GroupVersionKind
	// Hash identifies the template's source content (its revision).
	Hash string
	// Policy says where the template's children may be written.
	Policy policy.Policy
	// Rollout says how a new revision reaches the parents.
	Rollout policy.Rollout

	root  string
	files map[string]string // sources by relative path (Files)
	// storeErr: the files are too large to store as a revision (StoreError).
	storeErr error
	ctx      *cue.Context // value's context, to encode the inputs of an evaluation
	value    cue.Value
	// evaluated is value without its compile-only blocks (compileonly.go):
	// what an evaluation unifies with its inputs.
	evaluated  cue.Value
	crd        *apiextensionsv1.CustomResourceDefinition
	schema     *structuralschema.Structural // of the whole parent object, for pruning
	childKinds []schema.GroupVersionKind
	// referenceKinds are the kinds of its references (references.go).
	referenceKinds []schema.GroupVersionKind
	// referenceDecls are its references as known without a parent: the
	// kind, and the namespace when it is literal (DeclaredReferences).
	referenceDecls []Reference
	// parentReads and observedReads are what the template reads of its
	// inputs (templates/reads).
	parentReads, observedReads reads.Set
	// topLevel names the top-level fields its files declare, nil when the
	// syntax cannot tell them all.
	topLevel map[string]bool
	graph    *graph.Graph
	// readyWhen: its files mention readyWhen, so evaluations look for it
	// on each child (ready.go).
	readyWhen bool
	// constraints are those of the spec the CRD does not carry
	// (openapi.Constraints).
	constraints []openapi.Constraint
	// versions is the versions block, nil without one (versions.go).
	versions *versionSet
	memo     memo // recent results; the only mutable part, internally locked
	// mayRunAway: GrowthWarnings has something to say (growth.go).
	mayRunAway bool
}

// CRD returns a copy of the CustomResourceDefinition generated for the
// template's parent kind.
func (t *Template) CRD() *apiextensionsv1.CustomResourceDefinition {
	return t.crd.DeepCopy()
}

// HasResources reports whether the template declares external resources, so
// its parents need a finalizer.
func (t *Template) HasResources() bool {
	return t.value.LookupPath(pathResources).Exists()
}

// Set is an immutable snapshot of every template of a directory.
type Set struct {
	// Root is the templates directory, absolute.
	Root      string
	templates []*Template
	byGVK     map[schema.GroupVersionKind]*Template
	// unchecked are the child kinds without a schema (childschema.go).
	unchecked []Unchecked
}

// Unchecked returns the child kinds Load found no schema for, so their
// children were not checked: warnings for the person running the command.
func (s *Set) Unchecked() []Unchecked { return s.unchecked }

// Templates returns the templates sorted by path.
func (s *Set) Templates() []*Template { return s.templates }

// Lookup returns the template for a parent kind.
func (s *Set) Lookup(gvk schema.GroupVersionKind) (*Template, bool) {
	t, ok := s.byGVK[gvk]
	return t, ok
}

// LoadError is returned by Load when some templates fail. Every failing
// template is listed, so one run of `engine vet` shows all problems.
type LoadError struct {
	Errors []*Error
	// Servable is the whole set when every failing template compiled and
	// is only too large to store as a revision (Template.StoreError): an
	// engine that starts with it serves those kinds on their newest stored
	// revision. Nil otherwise.
	Servable *Set
	// Loaded holds the templates that did load, for tools that report
	// template by template (engine test runs their cases); never served.
	Loaded *Set
}

func (e *LoadError) Error() string {
	var parts []string
	for _, te := range e.Errors {
		parts = append(parts, te.Error())
	}
	return strings.Join(parts, "\n")
}

// Load reads and compiles every template under dir. It returns an error
// (a *LoadError when templates are at fault) unless every template compiles,
// no two claim the same kind and every child fits its kind's schema.
func Load(dir string) (*Set, error) { return LoadWith(dir, LoadOptions{}) }

// LoadWith is Load with more places to find the schemas of child kinds.
func LoadWith(dir string, opts LoadOptions) (_ *Set, err error) {
	defer recovered(dir, "loading the templates", &err)
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	sources, err := discover(root)
	if err != nil {
		return nil, err
	}
	c := &compiler{root: root, ctx: cuecontext.New()}
	set := &Set{Root: root, byGVK: map[schema.GroupVersionKind]*Template{}}
	var failed LoadError
	unstorable := 0
	for _, src := range sources {
		t, err := c.compile(src)
		if err == nil {
			if t.storeErr = storable(src.path, src.contents); t.storeErr != nil {
				failed.Errors = append(failed.Errors, t.storeErr.(*Error))
				unstorable++
			}
		}
		if err != nil {
			var te *Error
			if !errors.As(err, &te) {
				te = &Error{Template: src.path, Problems: []Problem{{Msg: err.Error()}}}
			}
			failed.Errors = append(failed.Errors, te)
			continue
		}
		if prev, dup := set.byGVK[t.GVK]; dup {
			failed.Errors = append(failed.Errors, c.problemf(src.path, t.value.LookupPath(pathKind), "parent.kind",
				"kind %s is already claimed by template %s", contract.KindString(t.GVK), prev.Path))
			continue
		}
		set.byGVK[t.GVK] = t
		set.templates = append(set.templates, t)
	}
	if err := c.checkSchemas(set, opts, &failed); err != nil {
		return nil, err
	}
	sort.Slice(set.templates, func(i, j int) bool { return set.templates[i].Path < set.templates[j].Path })
	if len(failed.Errors) > 0 {
		if unstorable == len(failed.Errors) {
			failed.Servable = set
		}
		failed.Loaded = set
		return nil, &failed
	}
	return set, nil
}

type compiler struct {
	root string
	ctx  *cue.Context
}

// compile builds one template from its files plus the engine's contract.
func (c *compiler) compile(src source) (_ *Template, err error) {
	defer recovered(src.path, "compiling", &err)
	dir := filepath.Dir(src.files[0])
	contractPath := filepath.Join(dir, contractFile)
	text := contractCUE
	if src.pkg != "" && src.pkg != "_" {
		text = "package " + src.pkg + "\n" + contractCUE
	}
	cfg := &load.Config{
		Dir:     c.root,
		Overlay: map[string]load.Source{contractPath: load.FromString(text)},
	}
	args := append(append([]string{}, src.files...), contractPath)
	insts := load.Instances(args, cfg)
	if len(insts) != 1 {
		return nil, fmt.Errorf("%s: expected one CUE instance, got %d", src.path, len(insts))
	}
	inst := insts[0]
	if inst.Err != nil {
		return nil, fromCUE(c.root, src.path, inst.Err)
	}
	v, err := c.buildInstance(inst)
	if err == nil {
		// Catch conflicts that do not depend on the parent, such as a
		// field declared with two incompatible types.
		err = v.Validate()
	}
	if err != nil {
		if e := c.topLevelIfs(src.path, inst); e != nil {
			return nil, e
		}
		return nil, fromCUE(c.root, src.path, err)
	}
	t := &Template{Name: src.name, Path: src.path, Hash: src.hash, root: c.root, files: src.contents, ctx: c.ctx, value: v}
	if t.GVK, err = c.gvk(src.path, v); err != nil {
		return nil, err
	}
	if pv := v.LookupPath(pathPolicy); pv.Exists() {
		if t.Policy, err = policy.DecodePolicy(pv); err != nil {
			return nil, c.blockError(src.path, pv, err)
		}
	}
	t.Rollout = policy.DefaultRollout
	if rv := v.LookupPath(pathRollout); rv.Exists() {
		if t.Rollout, err = policy.DecodeRollout(rv); err != nil {
			return nil, c.blockError(src.path, rv, err)
		}
	}
	for _, name := range []string{"children", "resources"} {
		if err := c.checkMap(src.path, v, name); err != nil {
			return nil, err
		}
	}
	if t.referenceKinds, t.referenceDecls, err = c.checkReferences(src.path, v); err != nil { // references.go
		return nil, err
	}
	if err := c.checkReady(src.path, v); err != nil { // ready.go
		return nil, err
	}
	t.readyWhen = declaresReadyWhen(src.contents)
	if t.evaluated, err = c.withoutCompileOnly(inst, v); err != nil {
		return nil, fromCUE(c.root, src.path, err)
	}
	t.childKinds = childKindsOf(src.files, t.GVK)
	t.parentReads, t.observedReads = reads.Of(src.files)
	t.topLevel = reads.TopLevel(src.files)
	if t.graph, err = graphOf(c.root, src.path, src.files); err != nil { // graph.go
		return nil, err
	}
	if err := c.decodeVersions(src.path, t); err != nil { // versions.go
		return nil, err
	}
	if t.crd, err = c.buildCRD(src.path, t, openapi.StatusShapeOf(src.files)); err != nil {
		return nil, err
	}
	if err := c.versionCRD(src.path, t); err != nil { // versions.go
		return nil, err
	}
	if t.schema, err = structural(t.crd); err != nil {
		return nil, &Error{Template: src.path, Problems: []Problem{{Path: "parent", Msg: "generated schema is not structural: " + err.Error()}}}
	}
	if err := c.checkDefaults(src.path, t); err != nil {
		return nil, err
	}
	t.constraints = openapi.Constraints(t.value.LookupPath(pathSpec), src.files, c.position)
	t.mayRunAway = len(t.GrowthWarnings()) > 0 // growth.go
	return t, nil
}

// buildInstance turns a loaded instance into a value, recovering from any
// panic inside CUE so that no input can crash the process.
func (c *compiler) buildInstance(inst *build.Instance) (v cue.Value, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("internal CUE error while compiling: %v", r)
		}
	}()
	v = c.ctx.BuildInstance(inst)
	return v, v.Err()
}

// topLevelIfs explains a template that does not compile because of a
// top-level if (or for) over the parent: CUE decides it when the template
// compiles, before any parent exists, so a parent field without a value
// there (enabled?: bool, enabled: bool) leaves every top-level field
// unknown, and CUE's error points at the field's declaration. It returns a
// problem at each such if when the template compiles without them, nil
// otherwise.
func (c *compiler) topLevelIfs(path string, inst *build.Instance) *Error {
	all := make([][]ast.Decl, len(inst.Files))
	kept := make([][]ast.Decl, len(inst.Files))
	var ifs []*ast.Comprehension
	for i, f := range inst.Files {
		all[i] = f.Decls
		for _, d := range f.Decls {
			if cp, ok := d.(*ast.Comprehension); ok && clausesRead(cp, "parent") {
				ifs = append(ifs, cp)
				continue
			}
			kept[i] = append(kept[i], d)
		}
	}
	if len(ifs) == 0 {
		return nil
	}
	for i, f := range inst.Files {
		f.Decls = kept[i]
	}
	defer func() {
		for i, f := range inst.Files {
			f.Decls = all[i]
		}
	}()
	slim := *inst
	if v, err := c.buildInstance(&slim); err != nil || v.Validate() != nil {
		return nil // something else is wrong too: CUE's errors say what
	}
	out := &Error{Template: path}
	for _, cp := range ifs {
		clauses := clausesText(cp)
		out.Problems = append(out.Problems, Problem{Pos: position(c.root, cp.Pos()), Msg: fmt.Sprintf(
			"%s: a top-level %s is decided when the template compiles, before any parent exists, so it cannot read the parent's fields; put it inside the field it adds to, as in children: {%s {...}}, or give the fields it reads a default (as in enabled: *false | bool)",
			clauses, clauseWord(cp), clauses)})
	}
	return out
}

// clausesRead reports whether a comprehension's clauses refer to a
// top-level name.
func clausesRead(cp *ast.Comprehension, name string) bool {
	found := false
	for _, cl := range cp.Clauses {
		ast.Walk(cl, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && id.Name == name {
				found = true
			}
			return !found
		}, nil)
	}
	return found
}

// clausesText is a comprehension's clauses as the source writes them.
func clausesText(cp *ast.Comprehension) string {
	var parts []string
	for _, cl := range cp.Clauses {
		switch cl := cl.(type) {
		case *ast.IfClause:
			parts = append(parts, "if "+exprText(cl.Condition))
		case *ast.ForClause:
			vars := exprText(cl.Value)
			if cl.Key != nil {
				vars = exprText(cl.Key) + ", " + vars
			}
			parts = append(parts, "for "+vars+" in "+exprText(cl.Source))
		case *ast.LetClause:
			parts = append(parts, "let "+exprText(cl.Ident)+" = "+exprText(cl.Expr))
		}
	}
	return strings.Join(parts, " ")
}

// clauseWord is "if" or "for", as the comprehension starts.
func clauseWord(cp *ast.Comprehension) string {
	if _, ok := cp.Clauses[0].(*ast.ForClause); ok {
		return "for"
	}
	return "if"
}

// blockError positions an error decoding a top-level block (policy,
// rollout) at the field it names.
func (c *compiler) blockError(path string, block cue.Value, err error) error {
	var fe *policy.FieldError
	if errors.As(err, &fe) {
		return c.problemf(path, block.LookupPath(cue.ParsePath(fe.Field)), fe.Block+"."+fe.Field, "%s", fe.Msg)
	}
	return fromCUE(c.root, path, err)
}

// gvk reads parent.apiVersion and parent.kind, which must be concrete.
func (c *compiler) gvk(path string, v cue.Value) (schema.GroupVersionKind, error) {
	parent := v.LookupPath(pathParent)
	av := v.LookupPath(pathAPIVersion)
	apiVersion, err := av.String()
	if err != nil || apiVersion == "" {
		return schema.GroupVersionKind{}, c.problemf(path, parent, "parent.apiVersion",
			`must be a concrete string such as "webapp.my.domain/v1"`)
	}
	kv := v.LookupPath(pathKind)
	kind, err := kv.String()
	if err != nil || kind == "" {
		return schema.GroupVersionKind{}, c.problemf(path, parent, "parent.kind",
			`must be a concrete string such as "MyKind"`)
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil || gv.Group == "" || gv.Version == "" {
		return schema.GroupVersionKind{}, c.problemf(path, av, "parent.apiVersion",
			"%q is not group/version: a parent kind needs its own API group, as in \"example.com/v1\"", apiVersion)
	}
	return gv.WithKind(kind), nil
}

// checkMap checks that children or resources, when present, is a struct.
func (c *compiler) checkMap(path string, v cue.Value, name string) error {
	m := v.LookupPath(cue.ParsePath(name))
	if !m.Exists() {
		return nil
	}
	// Bottom alone means "not known until a parent is filled in" (a
	// comprehension over parent fields); only a definite non-struct is wrong.
	if k := m.IncompleteKind(); k != cue.BottomKind && k&cue.StructKind == 0 {
		return c.problemf(path, m, name, "must be a map of local name to object, not %v", k)
	}
	return nil
}

// exprText is an expression as the source writes it, on one line.
func exprText(e ast.Expr) string {
	b, err := format.Node(e)
	if err != nil {
		return "an expression"
	}
	return strings.Join(strings.Fields(string(b)), " ")
}
