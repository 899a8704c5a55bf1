package templates

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"cuelang.org/go/cue"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ConversionError is a parent that does not convert between two versions
// of its kind: the conversion's CUE error, or a converted value that does
// not fit the target version's schema. Problems name the field in the
// object (spec.container.image) and the template's file:line.
type ConversionError struct {
	From, To string
	Problems []Problem
}

func (e *ConversionError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return fmt.Sprintf("converting %s to %s: %s", e.From, e.To, strings.Join(parts, "; "))
}

// Convert returns obj, a parent in any declared version of the template's
// kind, in version to: through the hub, with the CUE of the versions block
// (toHub from obj's version, fromHub to the target). Only spec, and status
// where a conversion gives one, change; metadata is kept as it is (the
// apiserver refuses any other change). A conversion that fails returns a
// *ConversionError and no object. Convert is safe for concurrent use.
func (t *Template) Convert(obj *unstructured.Unstructured, to string) (out *unstructured.Unstructured, err error) {
	gv, err := schema.ParseGroupVersion(obj.GetAPIVersion())
	if err != nil {
		return nil, err
	}
	from := gv.Version
	if gv.Group != t.GVK.Group || obj.GetKind() != t.GVK.Kind {
		return nil, fmt.Errorf("%s %s is not template %s's kind %s", obj.GetAPIVersion(), obj.GetKind(), t.Path, t.GVK.GroupKind())
	}
	for _, v := range []string{from, to} {
		if !t.declares(v) {
			return nil, &ConversionError{From: from, To: to, Problems: []Problem{{Path: "apiVersion",
				Msg: fmt.Sprintf("%s is not a version of %s (template %s declares %s)", v, t.GVK.Kind, t.Path, strings.Join(t.versionNames(), ", "))}}}
		}
	}
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, &ConversionError{From: from, To: to, Problems: []Problem{{Msg: fmt.Sprintf("internal CUE error: %v", r)}}}
		}
	}()
	out = obj.DeepCopy()
	hub := t.GVK.Version
	if from != hub {
		o := t.versions.others[from]
		if out, err = t.step(out, from, hub, o.toHub, o.spec, t.value.LookupPath(pathSpec)); err != nil {
			return nil, err
		}
	}
	if to != hub {
		o := t.versions.others[to]
		if out, err = t.step(out, hub, to, o.fromHub, t.value.LookupPath(pathSpec), o.spec); err != nil {
			return nil, err
		}
	}
	out.SetAPIVersion(schema.GroupVersion{Group: t.GVK.Group, Version: to}.String())
	return out, nil
}

func (t *Template) declares(v string) bool {
	for _, d := range t.Versions() {
		if d.Name == v {
			return true
		}
	}
	return false
}

func (t *Template) versionNames() []string {
	var out []string
	for _, d := range t.Versions() {
		out = append(out, d.Name)
	}
	return out
}

// step runs one conversion block: in is the object's spec (unified with
// the schema of its version, so its defaults apply), status and metadata;
// out.spec, unified with the target's schema, must be concrete and hold
// nothing the target's CRD schema would drop.
func (t *Template) step(obj *unstructured.Unstructured, from, to string, block, inSchema, outSchema cue.Value) (*unstructured.Unstructured, error) {
	fail := func(err error) error {
		e := fromCUE(t.root, t.Path, err)
		for i := range e.Problems {
			e.Problems[i].Path = objectPath(e.Problems[i].Path)
		}
		return &ConversionError{From: from, To: to, Problems: e.Problems}
	}
	in := map[string]any{"spec": map[string]any{}}
	if spec, ok := obj.Object["spec"]; ok && spec != nil {
		in["spec"] = spec
	}
	if status, ok := obj.Object["status"]; ok && status != nil {
		in["status"] = status
	}
	md := map[string]any{"name": obj.GetName()}
	if ns := obj.GetNamespace(); ns != "" {
		md["namespace"] = ns
	}
	if l := obj.GetLabels(); len(l) > 0 {
		md["labels"] = toAny(l)
	}
	if a := obj.GetAnnotations(); len(a) > 0 {
		md["annotations"] = toAny(a)
	}
	in["metadata"] = md
	expr, err := syntaxOf(map[string]any{"in": in})
	if err != nil {
		return nil, &ConversionError{From: from, To: to, Problems: []Problem{{Msg: err.Error()}}}
	}
	v := block.FillPath(pathInSpec, inSchema).Unify(t.ctx.BuildExpr(expr))
	// A check beside out (a hidden field) holds as much as out itself.
	if err := v.Validate(cue.Hidden(true)); err != nil {
		return nil, fail(err)
	}
	if err := v.LookupPath(pathInSpec).Validate(cue.Concrete(true), cue.Final()); err != nil {
		return nil, fail(err)
	}
	spec := v.LookupPath(pathOutSpec).Unify(outSchema)
	if err := spec.Validate(cue.Concrete(true), cue.Final()); err != nil {
		return nil, fail(err)
	}
	var specJSON any
	if err := decodeJSON(spec, &specJSON); err != nil {
		return nil, fail(err)
	}
	out := obj.DeepCopy()
	out.Object["spec"] = specJSON
	if st := v.LookupPath(pathOutStat); st.Exists() {
		if err := st.Validate(cue.Concrete(true), cue.Final()); err != nil {
			return nil, fail(err)
		}
		var status any
		if err := decodeJSON(st, &status); err != nil {
			return nil, fail(err)
		}
		out.Object["status"] = status
	}
	if dropped := t.dropped(out, to); len(dropped) > 0 {
		e := &ConversionError{From: from, To: to}
		for _, d := range dropped {
			e.Problems = append(e.Problems, Problem{Pos: userPos(t.root, block.LookupPath(pathOutSpec)), Path: d,
				Msg: fmt.Sprintf("not in the schema of %s: the apiserver would drop it", to)})
		}
		return nil, e
	}
	return out, nil
}

// dropped lists the fields of a converted object that the CRD schema of
// its version would prune.
func (t *Template) dropped(obj *unstructured.Unstructured, version string) []string {
	s := t.schema
	if version != t.GVK.Version {
		s = t.versions.others[version].structural
	}
	cp := obj.DeepCopy()
	return prune(cp.Object, s)
}

// objectPath turns the CUE path of a conversion's error
// (versions.v1.toHub.out.spec.container.image) into the field of the
// object it is about (spec.container.image).
func objectPath(p string) string {
	for _, part := range []string{".out.", ".in."} {
		if i := strings.Index(p, part); i >= 0 {
			return p[i+len(part):]
		}
	}
	for _, part := range []string{"out.", "in."} {
		if rest, ok := strings.CutPrefix(p, part); ok {
			return rest
		}
	}
	return p
}

// decodeJSON exports a concrete value as JSON into the generic form
// unstructured holds (int64 for integers).
func decodeJSON(v cue.Value, out *any) error {
	b, err := v.MarshalJSON()
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(append(append([]byte(`{"apiVersion":"x/v1","kind":"X","v":`), b...), '}')); err != nil {
		return err
	}
	*out = u.Object["v"]
	return nil
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// RoundTrips converts obj (a parent in any declared version) to the hub,
// and from the hub to every other version and back, and returns a problem
// for each field a way back loses or changes, at the conversion that
// loses it: the fromHub of the version when the hub's field does not come
// back, the toHub of obj's version when obj's own field does not. Fields
// that come back only with a default are not losses. An error is a
// conversion that fails.
func (t *Template) RoundTrips(obj *unstructured.Unstructured) (_ []Problem, err error) {
	defer recovered(t.Path, "converting "+obj.GetName()+" both ways", &err)
	if !t.Converts() {
		return nil, nil
	}
	gv, err := schema.ParseGroupVersion(obj.GetAPIVersion())
	if err != nil {
		return nil, err
	}
	hubObj, err := t.Convert(obj, t.GVK.Version)
	if err != nil {
		return nil, err
	}
	var problems []Problem
	for _, v := range t.versions.list {
		if v.Hub {
			continue
		}
		there, err := t.Convert(hubObj, v.Name)
		if err != nil {
			return nil, err
		}
		back, err := t.Convert(there, t.GVK.Version)
		if err != nil {
			return nil, err
		}
		o := t.versions.others[v.Name]
		for _, l := range lost(hubObj.Object, back.Object) {
			problems = append(problems, Problem{Pos: userPos(t.root, o.fromHub), Path: "versions." + v.Name + ".fromHub",
				Msg: fmt.Sprintf("%s is lost converting the hub %s to %s and back: %s", l.path, t.GVK.Version, v.Name, l.how)})
		}
	}
	// obj's own fields, when the way from the hub lost nothing (else that
	// loss is already named, and is likely this one too).
	if gv.Version != t.GVK.Version && len(problems) == 0 {
		back, err := t.Convert(hubObj, gv.Version)
		if err != nil {
			return nil, err
		}
		o := t.versions.others[gv.Version]
		for _, l := range lost(obj.Object, back.Object) {
			problems = append(problems, Problem{Pos: userPos(t.root, o.toHub), Path: "versions." + gv.Version + ".toHub",
				Msg: fmt.Sprintf("%s is lost converting %s to the hub %s and back: %s", l.path, gv.Version, t.GVK.Version, l.how)})
		}
	}
	return problems, nil
}

type loss struct{ path, how string }

// lost lists the fields of was's spec and status that now lacks or holds
// with another value.
func lost(was, now map[string]any) []loss {
	var out []loss
	for _, top := range []string{"spec", "status"} {
		if w, ok := was[top]; ok {
			diffInto(&out, top, w, now[top], now != nil && hasKey(now, top))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}

func hasKey(m map[string]any, k string) bool { _, ok := m[k]; return ok }

func diffInto(out *[]loss, path string, was, now any, present bool) {
	if !present {
		*out = append(*out, loss{path, fmt.Sprintf("was %s, came back absent", jsonText(was))})
		return
	}
	wm, wok := was.(map[string]any)
	nm, nok := now.(map[string]any)
	if wok && nok {
		keys := make([]string, 0, len(wm))
		for k := range wm {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			n, ok := nm[k]
			diffInto(out, path+"."+k, wm[k], n, ok)
		}
		return
	}
	if !reflect.DeepEqual(was, now) {
		*out = append(*out, loss{path, fmt.Sprintf("was %s, came back %s", jsonText(was), jsonText(now))})
	}
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
