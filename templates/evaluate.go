package templates

import (
	"bytes"
	"fmt"
	"math"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/token"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates/graph"
	"github.com/cuengine/engine/templates/reads"
)

// Input is what one evaluation needs: the live parent and the observed state
// of its children and resources.
type Input struct {
	// Parent is the parent object as stored (or as read from a file).
	Parent *unstructured.Unstructured
	// Observed maps a local name to the live child object (its content) or to
	// the provider's observation of a resource. Absent names do not exist yet.
	Observed map[string]any
}

// Result is the desired state for one parent.
type Result struct {
	// Children are the desired Kubernetes objects, sorted by local name.
	Children []Child
	// Resources are the desired external resources, sorted by local name.
	Resources []Resource
	// Status holds the fields the template writes into the parent's status.
	Status map[string]any
	// Ready is the template's own readiness verdict, nil when it has none.
	Ready *bool
	// ReadyReason and ReadyMessage are what the template's ready says
	// with it, in its struct form; "" when it says nothing.
	ReadyReason, ReadyMessage string
	// Pruned lists the parent fields the schema does not declare, dropped
	// before evaluation the way the apiserver drops them.
	Pruned []string
	// Size is the size in bytes of everything rendered, as JSON.
	Size int
	// Remembered is true when the template's memory answered: the inputs
	// were those of a recent evaluation, whose result this is.
	Remembered bool
}

// Child is one desired Kubernetes object.
type Child struct {
	Name   string
	Object *unstructured.Unstructured
	// DependsOn are the local names the child depends on (templates/graph).
	DependsOn []string
	// ReadyWhen is what the child's readyWhen says, nil without one
	// (ready.go).
	ReadyWhen *ChildReadiness
	// Ownership maps each field path the child leaves to other writers to
	// its mode (contract.OwnershipCreateOnly or OwnershipShared); nil
	// without an ownership field (leftfields.go).
	Ownership map[string]string
	// Cluster is the registered workload cluster the child is put in, ""
	// for the engine's own (clusters.go).
	Cluster string
}

// Resource is one desired external resource.
type Resource struct {
	Name           string
	Provider       string
	Spec           map[string]any
	DeletionPolicy string // "Delete" or "Orphan"
	// DependsOn are the local names the resource depends on (templates/graph).
	DependsOn []string
	// ConnectionSecret is the name of the Secret, in the parent's
	// namespace, that the engine writes the provider's sensitive outputs
	// into (connectionSecret: name: "..."); empty when there is none.
	ConnectionSecret string
}

// fieldConnectionSecret is a resource's connectionSecret field.
const fieldConnectionSecret = "connectionSecret"

// Deletion policies of a resource.
const (
	DeletionPolicyDelete = "Delete"
	DeletionPolicyOrphan = "Orphan"
)

// Evaluate computes the desired state for one parent. It never panics: a
// panic inside CUE is returned as an error. A parent that violates the
// template's schema, or a template that cannot produce concrete output for
// it, yields an *Error with CUE paths and positions. The Result is the
// caller's own, except its Pruned slice, which Results of the same inputs
// share: callers must not modify it.
func (t *Template) Evaluate(in Input) (*Result, error) {
	return t.evaluate(in, t.parentReads, t.observedReads, &t.memo)
}

// evaluate is Evaluate handing CUE what parentReads and observedReads keep
// of the parent and of observed, remembering in mem (nil: nothing).
// Evaluate passes the template's own; the differential test (trim_test.go)
// passes everything, with no memory, to compare.
func (t *Template) evaluate(in Input, parentReads, observedReads reads.Set, mem *memo) (res *Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, &Error{Template: t.Path, Problems: []Problem{{
				Msg: fmt.Sprintf("evaluation panicked: %v\n%s", r, debug.Stack()),
			}}}
		}
	}()
	parent, pruned := t.parentInputKeeping(in.Parent, parentReads)
	observed, observedKey := observedReads.Filter(in.Observed)
	key, remember := memoKey(parent, observedKey, pruned)
	remember = remember && mem != nil
	if remember {
		if r := mem.get(key); r != nil {
			// The JSON decoded once already: it decodes again. Were it
			// not to, evaluating is the answer.
			if res, err := t.decode(r); err == nil {
				return res, nil
			}
		}
	}
	v := t.fill(parent, observed)
	if err := t.checkParent(v); err != nil {
		return nil, err
	}
	out := &rendered{pruned: pruned}
	res = &Result{Pruned: pruned}
	if res.Children, err = t.children(v, out); err != nil {
		return nil, err
	}
	if res.Resources, err = t.resources(v, out); err != nil {
		return nil, err
	}
	if sv := v.LookupPath(pathOutStatus); sv.Exists() {
		if out.status, err = export(t, sv, "status", &res.Status, out); err != nil {
			return nil, err
		}
	}
	if rv := t.lookupDeclared(v, "ready", pathReady); rv.Exists() {
		r, err := t.readyOf(rv, out) // ready.go
		if err != nil {
			return nil, err
		}
		res.Ready, out.ready = &r.ok, r
		res.ReadyReason, res.ReadyMessage = r.reason, r.message
	}
	res.Size = out.size
	if remember {
		mem.put(key, out)
	}
	return res, nil
}

// rendered is an evaluation's output as the JSON CUE exported: what the
// template's memory keeps. It is a few hundred bytes where the Result
// decoded from it holds kilobytes of maps (a Deployment: 325 bytes, about
// 4 KiB of maps), so the memory can span a burst of parents.
type rendered struct {
	children  []renderedPart // sorted by name, as Result.Children
	resources []renderedPart // sorted by name, as Result.Resources
	status    []byte         // nil when the template writes none
	ready     *readiness
	pruned    []string
	size      int // Result.Size
}

// renderedPart is one child or resource, by its local name.
type renderedPart struct {
	name string
	raw  []byte
	// readyWhen is a child's (Child.ReadyWhen).
	readyWhen *ChildReadiness
}

// decode is the Result of a rendered evaluation, equal to the one the
// evaluation returned.
func (t *Template) decode(r *rendered) (*Result, error) {
	res := &Result{Pruned: r.pruned, Size: r.size, Remembered: true}
	for _, c := range r.children {
		obj := map[string]any{}
		if err := utiljson.Unmarshal(c.raw, &obj); err != nil {
			return nil, err
		}
		res.Children = append(res.Children, t.child(c.name, obj, c.readyWhen))
	}
	for _, rs := range r.resources {
		var raw map[string]any
		if err := utiljson.Unmarshal(rs.raw, &raw); err != nil {
			return nil, err
		}
		res.Resources = append(res.Resources, t.resource(rs.name, raw))
	}
	if r.status != nil {
		if err := utiljson.Unmarshal(r.status, &res.Status); err != nil {
			return nil, err
		}
	}
	if r.ready != nil {
		ready := r.ready.ok
		res.Ready = &ready
		res.ReadyReason, res.ReadyMessage = r.ready.reason, r.ready.message
	}
	return res, nil
}

// parentInput returns the parent's content as the template sees it: spec
// and status pruned to the schema, and of the metadata and the status only
// what the template reads (templates/reads).
func (t *Template) parentInput(obj *unstructured.Unstructured) (map[string]any, []string) {
	return t.parentInputKeeping(obj, t.parentReads)
}

// parentInputKeeping is parentInput keeping what rs keeps.
func (t *Template) parentInputKeeping(obj *unstructured.Unstructured, rs reads.Set) (map[string]any, []string) {
	// Copy only what the template may see: the rest of the metadata
	// (managedFields above all) would be copied only to be dropped.
	content := make(map[string]any, len(obj.Object))
	for k, v := range obj.Object {
		if k != "metadata" {
			content[k] = runtime.DeepCopyJSONValue(v)
		}
	}
	md, _ := obj.Object["metadata"].(map[string]any)
	meta := map[string]any{}
	// Not resourceVersion: it changes with every status write, and would
	// make every evaluation look new.
	for _, k := range []string{"name", "namespace", "uid", "labels", "annotations", "generation", "creationTimestamp"} {
		if x, ok := md[k]; ok && x != nil {
			meta[k] = runtime.DeepCopyJSONValue(x)
		}
	}
	content["metadata"] = meta
	// The root's metadata is never pruned: pruning after the pick drops
	// the same fields as before it.
	pruned := prune(content, t.schema)
	if st, ok := content["status"].(map[string]any); ok {
		for _, k := range contract.EngineStatusFields() {
			delete(st, k)
		}
	}
	return rs.Parent(content), pruned
}

func (t *Template) children(v cue.Value, out *rendered) ([]Child, error) {
	m := v.LookupPath(pathChildren)
	if !m.Exists() {
		return nil, nil
	}
	it, err := m.Fields()
	if err != nil {
		return nil, fromCUE(t.root, t.Path, err)
	}
	var children []Child
	for it.Next() {
		name := it.Selector().Unquoted()
		cv := it.Value()
		path := "children." + it.Selector().String()
		obj := map[string]any{}
		raw, rw, err := t.exportChild(cv, path, &obj, out) // ready.go
		if err != nil {
			return nil, err
		}
		if err := t.checkOwnership(cv, path, obj[fieldOwnership]); err != nil { // leftfields.go
			return nil, err
		}
		if err := t.checkCluster(cv, path, obj[fieldCluster]); err != nil { // clusters.go
			return nil, err
		}
		c := t.child(name, obj, rw)
		for f, got := range map[string]string{"apiVersion": c.Object.GetAPIVersion(), "kind": c.Object.GetKind(), "metadata.name": c.Object.GetName()} {
			if got == "" {
				return nil, &Error{Template: t.Path, Problems: []Problem{{
					Pos: userPos(t.root, cv), Path: path + "." + f,
					Msg: "every child needs a concrete, non-empty " + f,
				}}}
			}
		}
		children = append(children, c)
		out.children = append(out.children, renderedPart{name: name, raw: raw, readyWhen: rw})
	}
	sort.Slice(children, func(i, j int) bool { return children[i].Name < children[j].Name })
	sort.Slice(out.children, func(i, j int) bool { return out.children[i].name < out.children[j].name })
	return children, nil
}

// child is the desired child of local name from its exported object.
func (t *Template) child(name string, obj map[string]any, rw *ChildReadiness) Child {
	own, _, _ := ownershipOf(obj[fieldOwnership]) // checked by children
	// The engine's, not the object's.
	delete(obj, fieldDependsOn)
	delete(obj, fieldOwnership)
	cluster := takeCluster(obj) // clusters.go
	return Child{Name: name, Object: &unstructured.Unstructured{Object: obj}, DependsOn: t.graph.Names(graph.ChildNode, name), ReadyWhen: rw, Ownership: own, Cluster: cluster}
}

func (t *Template) resources(v cue.Value, out *rendered) ([]Resource, error) {
	m := t.lookupDeclared(v, "resources", pathResources)
	if !m.Exists() {
		return nil, nil
	}
	it, err := m.Fields()
	if err != nil {
		return nil, fromCUE(t.root, t.Path, err)
	}
	var resources []Resource
	secrets := map[string]string{} // connection Secret name -> resource
	for it.Next() {
		path := "resources." + it.Selector().String()
		var raw map[string]any
		b, err := export(t, it.Value(), path, &raw, out)
		if err != nil {
			return nil, err
		}
		r := t.resource(it.Selector().Unquoted(), raw)
		bad := func(field, msg string) error {
			return &Error{Template: t.Path, Problems: []Problem{{Pos: userPos(t.root, it.Value()), Path: path + "." + field, Msg: msg}}}
		}
		if r.Provider == "" {
			return nil, bad("provider", `every resource needs a provider, such as "gcs"`)
		}
		if r.DeletionPolicy != DeletionPolicyDelete && r.DeletionPolicy != DeletionPolicyOrphan {
			return nil, bad("deletionPolicy", fmt.Sprintf("must be %q or %q, not %q", DeletionPolicyDelete, DeletionPolicyOrphan, r.DeletionPolicy))
		}
		if field, msg := checkConnectionSecret(raw); msg != "" {
			return nil, bad(field, msg)
		}
		if r.ConnectionSecret != "" {
			if other, taken := secrets[r.ConnectionSecret]; taken {
				return nil, bad(fieldConnectionSecret+".name", fmt.Sprintf("%q is already the connection Secret of resources.%s: each resource needs its own", r.ConnectionSecret, other))
			}
			secrets[r.ConnectionSecret] = r.Name
		}
		resources = append(resources, r)
		out.resources = append(out.resources, renderedPart{name: r.Name, raw: b})
	}
	sort.Slice(resources, func(i, j int) bool { return resources[i].Name < resources[j].Name })
	sort.Slice(out.resources, func(i, j int) bool { return out.resources[i].name < out.resources[j].name })
	return resources, nil
}

// resource is the desired resource of local name from its exported value;
// an absent deletionPolicy is Delete.
func (t *Template) resource(name string, raw map[string]any) Resource {
	r := Resource{Name: name, DependsOn: t.graph.Names(graph.ResourceNode, name)}
	r.Provider, _ = raw["provider"].(string)
	r.Spec, _ = raw["spec"].(map[string]any)
	r.DeletionPolicy, _ = raw["deletionPolicy"].(string)
	if r.DeletionPolicy == "" {
		r.DeletionPolicy = DeletionPolicyDelete
	}
	if cs, ok := raw[fieldConnectionSecret].(map[string]any); ok {
		r.ConnectionSecret, _ = cs["name"].(string)
	}
	return r
}

// checkConnectionSecret says what is wrong with a resource's
// connectionSecret: name: "..." (the field and a message), if anything.
func checkConnectionSecret(raw map[string]any) (field, msg string) {
	v, ok := raw[fieldConnectionSecret]
	if !ok || v == nil {
		return "", ""
	}
	m, ok := v.(map[string]any)
	if !ok {
		return fieldConnectionSecret, `must be an object such as {name: "app-db"}`
	}
	for k := range m {
		if k != "name" {
			return fieldConnectionSecret + "." + k, `is not a known field (known: name)`
		}
	}
	name, _ := m["name"].(string)
	if name == "" {
		return fieldConnectionSecret + ".name", "must be a non-empty string: the name of the Secret to write the resource's credentials into"
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fieldConnectionSecret + ".name", fmt.Sprintf("%q is not a valid Secret name: %s", name, strings.Join(errs, "; "))
	}
	return "", ""
}

// lookupDeclared looks up a top-level field of v, when the template's files
// may declare it: a template without resources (or ready) spends no lookup,
// and no walk of the contract's empty struct, on them in each evaluation.
func (t *Template) lookupDeclared(v cue.Value, name string, path cue.Path) cue.Value {
	if t.topLevel != nil && !t.topLevel[name] {
		return cue.Value{}
	}
	return v.LookupPath(path)
}

// export decodes a concrete value through JSON, which yields the plain
// types Kubernetes can deep-copy, adds the JSON's size to out and returns
// the JSON. MarshalJSON refuses anything that is not concrete; only then
// is the (slower) validation run, for its positioned messages.
func export(t *Template, v cue.Value, path string, into any, out *rendered) ([]byte, error) {
	b, err := v.MarshalJSON()
	out.size += len(b)
	if err != nil {
		if verr := v.Validate(cue.Concrete(true), cue.Final()); verr != nil {
			err = verr
		}
		return nil, fromCUE(t.root, t.Path, err, t.value)
	}
	// utiljson keeps whole numbers as int64, as Kubernetes' unstructured does.
	if err := utiljson.Unmarshal(b, into); err != nil {
		return nil, &Error{Template: t.Path, Problems: []Problem{{Path: path, Msg: err.Error()}}}
	}
	// The template's memory keeps the JSON: not the room its encoder grew
	// (up to twice the bytes; 2.5 MiB held for 1.3 MiB of JSON in the
	// bench's heap profile).
	if cap(b) > len(b) {
		b = bytes.Clone(b)
	}
	return b, nil
}

// ValidateParent checks a parent object against the template's schema only,
// without producing children: what a reload uses to make sure a new schema
// still accepts every live object of its kind.
func (t *Template) ValidateParent(obj *unstructured.Unstructured) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &Error{Template: t.Path, Problems: []Problem{{Msg: fmt.Sprintf("validation panicked: %v", r)}}}
		}
	}()
	parent, _ := t.parentInput(obj)
	return t.checkParent(t.fill(parent, nil))
}

// fill unifies the template with the parent (pruned to the schema) and the
// observed state, in one unification: much cheaper than a FillPath each.
// The input is built as CUE syntax, not encoded from the Go maps: CUE
// (v0.17.1) loses what a comprehension embeds from a value Context.Encode
// made, so `[for s in observed.x.items {s.data}]` gave `[{}]` and a live
// object handed to a definition (`#I & {in: c}`) had no fields there
// (issue 34).
func (t *Template) fill(parent, observed map[string]any) cue.Value {
	if observed == nil {
		observed = map[string]any{}
	}
	in, err := syntaxOf(map[string]any{"parent": parent, "observed": observed})
	if err != nil {
		return t.ctx.Encode(err) // an error value: the evaluation reports it
	}
	return t.evaluated.Unify(t.ctx.BuildExpr(in))
}

// syntaxOf is a JSON value (as unstructured holds it) as a CUE expression,
// the fields of a struct sorted. A float stays a float (2.0, not the int
// 2, which a `float` field refuses).
func syntaxOf(v any) (ast.Expr, error) {
	switch x := v.(type) {
	case nil:
		return ast.NewNull(), nil
	case bool:
		return ast.NewBool(x), nil
	case string:
		return ast.NewString(x), nil
	case int64:
		return numberLit(token.INT, strconv.FormatInt(x, 10)), nil
	case int:
		return numberLit(token.INT, strconv.Itoa(x)), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%v is not a JSON number", x)
		}
		s := strconv.FormatFloat(x, 'g', -1, 64)
		if !strings.ContainsAny(s, ".e") {
			s += ".0"
		}
		return numberLit(token.FLOAT, s), nil
	case []any:
		elts := make([]ast.Expr, len(x))
		for i, e := range x {
			var err error
			if elts[i], err = syntaxOf(e); err != nil {
				return nil, err
			}
		}
		return ast.NewList(elts...), nil
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		s := &ast.StructLit{Elts: make([]ast.Decl, len(keys))}
		for i, k := range keys {
			val, err := syntaxOf(x[k])
			if err != nil {
				return nil, err
			}
			s.Elts[i] = &ast.Field{Label: ast.NewString(k), Value: val}
		}
		return s, nil
	}
	return nil, fmt.Errorf("unsupported value of type %T", v)
}

// numberLit is a numeric literal; a negative one is the negation of its
// absolute value, as CUE's syntax has it.
func numberLit(kind token.Token, s string) ast.Expr {
	if abs, neg := strings.CutPrefix(s, "-"); neg {
		return &ast.UnaryExpr{Op: token.SUB, X: &ast.BasicLit{Kind: kind, Value: abs}}
	}
	return &ast.BasicLit{Kind: kind, Value: s}
}

// checkParent reports a parent that violates the schema: a conflict, or a
// required spec field left out (reported on the spec, not on the first
// child that happens to use it). The spec is valid when it exports; the
// validations run only to explain a failure. Validating it as concrete and
// final first is the fast check (it builds no JSON and sorts no fields);
// what fails it but exports (an error in a hidden field or a definition)
// is not the parent's problem, so the export still decides.
func (t *Template) checkParent(v cue.Value) error {
	spec := v.LookupPath(pathSpec)
	if !spec.Exists() {
		return nil
	}
	if spec.Validate(cue.Concrete(true), cue.Final()) == nil {
		return nil
	}
	if _, err := spec.MarshalJSON(); err == nil {
		return nil
	}
	if err := v.LookupPath(pathParent).Validate(); err != nil {
		return fromCUE(t.root, t.Path, err, t.value)
	}
	if err := spec.Validate(cue.Concrete(true)); err != nil {
		return fromCUE(t.root, t.Path, err, t.value)
	}
	return nil
}
