package templates

import (
	"encoding/json"
	"fmt"
	"runtime/debug"
	"slices"
	"sort"
	"strings"

	"cuelang.org/go/cue"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// pathReferences is the top-level block of the objects a template reads
// and does not own.
var pathReferences = cue.ParsePath("references")

// Reference is one object (or list of objects) a template reads and does
// not own: the engine watches it, hands it to the template as
// observed.<Name> and never writes it.
type Reference struct {
	// Name is the local name: the template reads observed.<Name>.
	Name string
	GVK  schema.GroupVersionKind
	// Namespace is the one the template gives, "" when it gives none (the
	// parent's, for a namespaced kind; see render.ResolveReferences).
	Namespace string
	// ObjectName names one object; "" when Selector selects a list.
	ObjectName string
	// Selector is the label selector's matchLabels: observed.<Name> is then
	// {items: [...]}, sorted by namespace and name. Nil when ObjectName is set.
	Selector map[string]string
}

// ByName reports whether the reference names one object (rather than
// selecting a list).
func (r Reference) ByName() bool { return r.Selector == nil }

// String names the reference for messages: "ConfigMap default/settings",
// "ConfigMap default with labels team=a".
func (r Reference) String() string {
	where := r.Namespace
	if r.ByName() {
		if where != "" {
			where += "/"
		}
		return r.GVK.Kind + " " + where + r.ObjectName
	}
	if where != "" {
		where += " "
	}
	return r.GVK.Kind + " " + where + "with labels " + labels.SelectorFromSet(r.Selector).String()
}

// HasReferences reports whether the template may declare references, so a
// reconcile reads them before anything else.
func (t *Template) HasReferences() bool {
	if t.topLevel != nil && !t.topLevel["references"] {
		return false
	}
	return t.value.LookupPath(pathReferences).Exists()
}

// ReferenceKinds returns the kinds the template references, as far as the
// compiled template shows them (every reference whose local name is
// literal): the engine watches them from the start and RBAC generation
// grants reading them.
func (t *Template) ReferenceKinds() []schema.GroupVersionKind {
	return append([]schema.GroupVersionKind(nil), t.referenceKinds...)
}

// DeclaredReferences returns the template's references as known without a
// parent: the kind, and the namespace when it is literal (engine rbac
// grants Secrets and ConfigMaps in those namespaces only).
func (t *Template) DeclaredReferences() []Reference {
	return slices.Clone(t.referenceDecls)
}

// References evaluates the template's references for one parent: they
// depend on the parent alone (the graph refuses a reference that reads
// observed state or children), so they are known before anything is read
// or written. They are sorted by local name. It never panics.
func (t *Template) References(parent *unstructured.Unstructured) (refs []Reference, err error) {
	if !t.HasReferences() {
		return nil, nil
	}
	defer func() {
		if r := recover(); r != nil {
			refs, err = nil, &Error{Template: t.Path, Problems: []Problem{{
				Msg: fmt.Sprintf("evaluating references panicked: %v\n%s", r, debug.Stack()),
			}}}
		}
	}()
	in, _ := t.parentInput(parent)
	v := t.fill(in, nil)
	if err := t.checkParent(v); err != nil {
		return nil, err
	}
	m := v.LookupPath(pathReferences)
	it, err := m.Fields()
	if err != nil {
		return nil, fromCUE(t.root, t.Path, err, t.value)
	}
	for it.Next() {
		ref, p := decodeReference(t.root, it.Selector().Unquoted(), it.Value(), true)
		if p != nil {
			return nil, &Error{Template: t.Path, Problems: []Problem{*p}}
		}
		refs = append(refs, ref)
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].Name < refs[j].Name })
	return refs, nil
}

// checkReferences checks at compile time what the references state without
// a parent: a concrete apiVersion and kind, a name or a selector (not both),
// a selector of matchLabels only, with valid labels when they are concrete.
// It returns the kinds referenced, and the references as far as they are
// known without a parent.
func (c *compiler) checkReferences(path string, v cue.Value) ([]schema.GroupVersionKind, []Reference, error) {
	m := v.LookupPath(pathReferences)
	if !m.Exists() {
		return nil, nil, nil
	}
	if k := m.IncompleteKind(); k != cue.BottomKind && k&cue.StructKind == 0 {
		return nil, nil, c.problemf(path, m, "references", "must be a map of local name to object reference, not %v", k)
	}
	it, err := m.Fields()
	if err != nil {
		return nil, nil, nil // depends on the parent: checked in each evaluation
	}
	var kinds []schema.GroupVersionKind
	var decls []Reference
	for it.Next() {
		ref, p := decodeReference(c.root, it.Selector().Unquoted(), it.Value(), false)
		if p != nil {
			return nil, nil, &Error{Template: path, Problems: []Problem{*p}}
		}
		if _, isDefault := it.Value().LookupPath(cue.ParsePath("metadata.namespace")).Default(); isDefault {
			ref.Namespace = "" // a default the parent may override: not literal
		}
		decls = append(decls, ref)
		if !slices.Contains(kinds, ref.GVK) {
			kinds = append(kinds, ref.GVK)
		}
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i].String() < kinds[j].String() })
	return kinds, decls, nil
}

// decodeReference reads one reference. final says the parent is filled in:
// every field must then be concrete. Before (final false) only apiVersion
// and kind must be; the rest is checked when it is concrete.
func decodeReference(root, name string, v cue.Value, final bool) (Reference, *Problem) {
	path := "references." + cue.Str(name).String()
	bad := func(at cue.Value, field, format string, args ...any) *Problem {
		p := path
		if field != "" {
			p += "." + field
		}
		pos := userPos(root, at)
		if pos == "" {
			pos = userPos(root, v)
		}
		return &Problem{Pos: pos, Path: p, Msg: fmt.Sprintf(format, args...)}
	}
	ref := Reference{Name: name}
	var gv schema.GroupVersion
	for _, f := range []string{"apiVersion", "kind"} {
		fv := v.LookupPath(cue.ParsePath(f))
		s, err := fv.String()
		if err != nil || s == "" {
			example := `"v1"`
			if f == "kind" {
				example = `"ConfigMap"`
			}
			return ref, bad(fv, f, "every reference needs a concrete %s, known without the parent, such as %s", f, example)
		}
		if f == "apiVersion" {
			if gv, err = schema.ParseGroupVersion(s); err != nil {
				return ref, bad(fv, f, "%q is not an apiVersion such as \"v1\" or \"apps/v1\"", s)
			}
		} else {
			ref.GVK = gv.WithKind(s)
		}
	}
	nv, sv := v.LookupPath(cue.ParsePath("metadata.name")), v.LookupPath(cue.ParsePath("selector"))
	switch {
	case !nv.Exists() && !sv.Exists():
		return ref, bad(v, "", "every reference needs metadata.name (one object) or selector.matchLabels (a list of objects)")
	case nv.Exists() && sv.Exists():
		return ref, bad(sv, "selector", "a reference has metadata.name (one object) or a selector (a list of objects), not both")
	}
	if nsv := v.LookupPath(cue.ParsePath("metadata.namespace")); nsv.Exists() {
		ns, err := nsv.String()
		switch {
		case err == nil:
			ref.Namespace = ns
		case final:
			return ref, bad(nsv, "metadata.namespace", "must be a concrete namespace name")
		}
	}
	if nv.Exists() {
		s, err := nv.String()
		switch {
		case err == nil && s != "":
			ref.ObjectName = s
		case err == nil || final:
			return ref, bad(nv, "metadata.name", "every reference by name needs a concrete, non-empty metadata.name")
		}
		return ref, nil
	}
	return decodeSelector(ref, sv, final, bad)
}

// decodeSelector reads a reference's selector: matchLabels and nothing
// else, at least one label, each key and value valid.
func decodeSelector(ref Reference, sv cue.Value, final bool, bad func(cue.Value, string, string, ...any) *Problem) (Reference, *Problem) {
	if k := sv.IncompleteKind(); k&cue.StructKind == 0 {
		return ref, bad(sv, "selector", "must be {matchLabels: {...}}, not %v", k)
	}
	it, err := sv.Fields(cue.Optional(true))
	if err != nil {
		if final {
			return ref, bad(sv, "selector", "must be {matchLabels: {...}}")
		}
		return ref, nil
	}
	for it.Next() {
		if f := it.Selector().Unquoted(); f != "matchLabels" {
			return ref, bad(it.Value(), "selector."+f, "only matchLabels is supported in a reference's selector")
		}
	}
	ml := sv.LookupPath(cue.ParsePath("matchLabels"))
	if !ml.Exists() {
		return ref, bad(sv, "selector", "a selector needs matchLabels")
	}
	b, err := ml.MarshalJSON()
	if err != nil {
		if final {
			return ref, bad(ml, "selector.matchLabels", "must map label keys to concrete string values")
		}
		return ref, nil // depends on the parent
	}
	var set map[string]string
	if err := json.Unmarshal(b, &set); err != nil {
		return ref, bad(ml, "selector.matchLabels", "must map label keys to string values")
	}
	if len(set) == 0 {
		return ref, bad(ml, "selector.matchLabels", "must name at least one label: an empty selector would select every object of the kind")
	}
	if _, err := labels.ValidatedSelectorFromSet(set); err != nil {
		return ref, bad(ml, "selector.matchLabels", "%s", strings.TrimSpace(err.Error()))
	}
	ref.Selector = set
	return ref, nil
}
