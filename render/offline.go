package render

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates"
)

// Given is the live state an offline rendering is given in place of the
// cluster (`engine render --observed`, `engine test`'s observed.yaml).
type Given struct {
	// Live are Kubernetes objects: each is the child of the same
	// apiVersion, kind and name (and namespace, when it has one), or what
	// a reference names or selects.
	Live []*unstructured.Unstructured
	// ByName are observations by local name, such as an external
	// resource's {name, url}. A reference given here is not looked up in
	// Live; a child matched in Live replaces the observation of its name.
	ByName map[string]any
}

// Offline renders a parent from a file as the reconcile converges on it,
// from the given live state instead of the cluster. The references are
// matched to the given objects once, as the engine reads them before
// evaluating. Then it renders, matches the given objects to every child
// rendered so far and renders again, until the matches stop changing: a
// child that waits for another's observed state (`if observed.service !=
// _|_ {children: ingress: ...}`) appears once the one it waits for is
// matched, as it does live in the reconcile after the one that created
// it. A matched child stays observed when a later rendering leaves it out,
// as it does live until it is pruned.
//
// It renders at most once per given object and once more. A template
// whose matches still change then (a child named after what it observes of
// itself) would change its children at every reconcile live: that is an
// error naming the child.
//
// A rendering that fails because the parent lacks metadata the apiserver
// gives every object (a name, a uid, a generation, a creation timestamp)
// is a *MissingMetadataError.
func Offline(t *templates.Template, parent *unstructured.Unstructured, given Given, opts Options) (*Rendered, error) {
	out, err := offline(t, parent, given, opts)
	if err != nil {
		return nil, missingMetadata(t, parent, given, opts, err)
	}
	return out, nil
}

func offline(t *templates.Template, parent *unstructured.Unstructured, given Given, opts Options) (*Rendered, error) {
	// The observations by name with each reference's view of the given
	// objects, as the engine reads them from the cluster; a reference
	// neither gives is missing, and the engine would wait for it. Reading
	// the given objects does no I/O: no context to end it.
	in, err := Observe(context.Background(), t, parent, given.ByName, given, ObserveOptions{Scoper: opts.Scoper, Limits: opts.Limits})
	if err != nil {
		return nil, err
	}
	base := in.Observed
	m := matches{byName: map[string]match{}}
	for n := 1; ; n++ {
		observed := maps.Clone(base)
		if observed == nil {
			observed = map[string]any{}
		}
		for name, mt := range m.byName {
			observed[name] = mt.obj.Object
		}
		out, err := Render(t, parent, observed, opts)
		if err != nil {
			return nil, err
		}
		changed := m.add(n, out.Children, given.Live)
		if changed == nil {
			return out, nil
		}
		if n > len(given.Live) {
			return nil, fmt.Errorf("the template does not settle on the given objects: rendering %d matched observed.%s to %s, rendering %d to %s; live, its children would change at every reconcile",
				n, changed.name, describeObject(changed.obj), changed.before.rendering, describeObject(changed.before.obj))
		}
	}
}

// matches are the given objects matched to children so far, by local
// name.
type matches struct {
	byName map[string]match
}

// match is a given object matched to a child, and the rendering that
// matched it.
type match struct {
	obj       *unstructured.Unstructured
	rendering int
}

// change is a child matched to a given object it was not matched to
// before: before is the earlier match, if any.
type change struct {
	name   string
	obj    *unstructured.Unstructured
	before match
}

// add matches the given objects to the children of rendering n and
// returns the last change to the matches, nil when there is none.
func (m *matches) add(n int, children []*unstructured.Unstructured, live []*unstructured.Unstructured) *change {
	var last *change
	for _, c := range children {
		name := c.GetLabels()[contract.LabelChild]
		for _, l := range live {
			if !sameObject(c, l) {
				continue
			}
			if before := m.byName[name]; before.obj != l {
				last = &change{name: name, obj: l, before: before}
				m.byName[name] = match{obj: l, rendering: n}
			}
			break
		}
	}
	return last
}

// sameObject reports whether a given object is the desired child: the
// same apiVersion, kind and name, and namespace when the object has one.
func sameObject(desired, given *unstructured.Unstructured) bool {
	return given.GetAPIVersion() == desired.GetAPIVersion() && given.GetKind() == desired.GetKind() && given.GetName() == desired.GetName() &&
		(given.GetNamespace() == "" || given.GetNamespace() == desired.GetNamespace())
}

func describeObject(obj *unstructured.Unstructured) string {
	if obj == nil {
		return "nothing"
	}
	if obj.GetNamespace() == "" {
		return obj.GetKind() + " " + obj.GetName()
	}
	return obj.GetKind() + " " + obj.GetNamespace() + "/" + obj.GetName()
}

// MissingMetadataError is an offline rendering that fails for want of
// metadata the apiserver gives every object: the parent, read from a file,
// has none of Fields.
type MissingMetadataError struct {
	// Fields are the metadata fields, such as "uid", in the order of
	// liveMetadata.
	Fields []string
	// Err is the rendering's error without them.
	Err error
}

func (e *MissingMetadataError) Error() string {
	return fmt.Sprintf("the parent has no metadata.%s, which the apiserver gives every object; the template fails without it: %v",
		strings.Join(e.Fields, ", metadata."), e.Err)
}

func (e *MissingMetadataError) Unwrap() error { return e.Err }

// liveMetadata are the metadata fields the apiserver gives every object
// (the namespace is defaulted offline, and a cluster-scoped object has
// none), each with a stand-in value of its type.
var liveMetadata = []struct {
	field string
	value any
}{
	{"name", "name"},
	{"uid", "00000000-0000-0000-0000-000000000000"},
	{"generation", int64(1)},
	{"creationTimestamp", "1970-01-01T00:00:00Z"},
}

// missingMetadata returns err, the failure of an offline rendering, as a
// *MissingMetadataError when the template's evaluation fails and giving
// the parent a field it lacks (one the apiserver gives every object)
// changes the outcome; otherwise err as it is. It renders again once per
// missing field, only on this failure path.
func missingMetadata(t *templates.Template, parent *unstructured.Unstructured, given Given, opts Options, err error) error {
	var te *templates.Error
	if !errors.As(err, &te) {
		return err
	}
	var fields []string
	for _, m := range liveMetadata {
		if v, _, _ := unstructured.NestedFieldNoCopy(parent.Object, "metadata", m.field); v != nil && v != "" {
			continue
		}
		filled := parent.DeepCopy()
		if unstructured.SetNestedField(filled.Object, m.value, "metadata", m.field) != nil {
			continue
		}
		if _, again := offline(t, filled, given, opts); again == nil || again.Error() != err.Error() {
			fields = append(fields, m.field)
		}
	}
	if len(fields) == 0 {
		return err
	}
	return &MissingMetadataError{Fields: fields, Err: err}
}
