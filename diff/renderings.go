package diff

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/render"
	"github.com/cuengine/engine/templates"
)

// Rendering is a template as a diff names it: "revision 2".
type Rendering struct {
	Name     string
	Template *templates.Template
}

// RenderError is a parent that one of the two templates of a diff cannot
// render: it fails to evaluate, or produces a child its policy forbids.
type RenderError struct {
	Rendering string // "revision 2"
	Parent    string // "MyKind apps/a"
	Err       error
}

func (e *RenderError) Error() string {
	return fmt.Sprintf("%s cannot render %s: %v", e.Rendering, e.Parent, e.Err)
}

func (e *RenderError) Unwrap() error { return e.Err }

// DiffRenderings renders one live parent with two templates, from and to,
// both seeing the same observed state (its live children, and its external
// resources as its status records them), each with its own references read
// from the cluster, and writes to Out a unified diff,
// from → to, of every child, external resource and status the two
// renderings disagree on. Nothing is written when they agree. Unlike
// DiffKind it runs no dry run: both sides are what the engine would apply,
// so the difference is the templates' alone. It only reads the cluster.
func (d *Differ) DiffRenderings(ctx context.Context, parent *unstructured.Unstructured, from, to Rendering) (Summary, error) {
	sum := Summary{Kind: contract.KindString(parent.GroupVersionKind()), Parents: 1}
	live, err := d.liveChildren(ctx, parent, from.Template, to.Template)
	if err != nil {
		return sum, err
	}
	observed := render.NewLiveChildren(live).Observed(parent)
	before, err := d.render(ctx, parent, from, observed)
	if err != nil {
		return sum, err
	}
	after, err := d.render(ctx, parent, to, observed)
	if err != nil {
		return sum, err
	}
	w := renderingWriter{d: d, parent: parent, from: from.Name, to: to.Name, sum: &sum}

	old := make(map[render.ChildKey]*unstructured.Unstructured, len(before.children))
	for _, obj := range before.children {
		old[render.ObjectKeyOf(obj)] = obj
	}
	kept := make(map[render.ChildKey]bool, len(after.children))
	for _, obj := range after.children {
		kept[render.ObjectKeyOf(obj)] = true
		w.compare(fmt.Sprintf("%s %s/%s", obj.GetKind(), obj.GetNamespace(), obj.GetName()), clean(old[render.ObjectKeyOf(obj)]), clean(obj))
	}
	for _, obj := range before.children {
		if !kept[render.ObjectKeyOf(obj)] {
			w.compare(fmt.Sprintf("%s %s/%s", obj.GetKind(), obj.GetNamespace(), obj.GetName()), clean(obj), "")
		}
	}

	oldRes := make(map[string]templates.Resource, len(before.resources))
	for _, r := range before.resources {
		oldRes[r.Name] = r
	}
	keptRes := make(map[string]bool, len(after.resources))
	for _, r := range after.resources {
		keptRes[r.Name] = true
		prev, ok := oldRes[r.Name]
		w.compare("resource "+r.Name, resourceYAML(prev, ok), resourceYAML(r, true))
	}
	for _, r := range before.resources {
		if !keptRes[r.Name] {
			w.compare("resource "+r.Name, resourceYAML(r, true), "")
		}
	}

	w.compare("status", statusYAML(before), statusYAML(after))
	return sum, nil
}

// rendering is what a template makes of one parent, as the engine would
// apply it.
type rendering struct {
	children  []*unstructured.Unstructured
	resources []templates.Resource
	status    map[string]any
	ready     *bool
}

// render renders the parent with r's template, from the live state and
// the template's own references (Differ.observe).
func (d *Differ) render(ctx context.Context, parent *unstructured.Unstructured, r Rendering, live map[string]any) (*rendering, error) {
	fail := func(err error) error {
		return &RenderError{Rendering: r.Name, Parent: fmt.Sprintf("%s %s/%s", parent.GetKind(), parent.GetNamespace(), parent.GetName()), Err: err}
	}
	in, err := d.observe(ctx, r.Template, parent, live)
	if err != nil {
		return nil, fail(err)
	}
	out, err := render.Render(r.Template, parent, in.Observed, d.renderOptions())
	if err != nil {
		return nil, fail(fmt.Errorf("%s", templates.Summary(err, 3)))
	}
	if len(out.Refused) > 0 {
		return nil, fail(out.Refused[0])
	}
	return &rendering{children: out.Children, resources: out.Result.Resources, status: out.Result.Status, ready: out.Result.Ready}, nil
}

// liveChildren lists the parent's existing children of every kind either
// template can produce, each once.
func (d *Differ) liveChildren(ctx context.Context, parent *unstructured.Unstructured, ts ...*templates.Template) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	seen := map[render.ChildKey]bool{}
	for _, t := range ts {
		list, err := d.children(ctx, t, parent)
		if err != nil {
			return nil, err
		}
		for _, c := range list {
			if k := render.KeyOf(c); !seen[k] {
				seen[k] = true
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// renderingWriter writes the differences between two renderings of one
// parent and counts them.
type renderingWriter struct {
	d        *Differ
	parent   *unstructured.Unstructured
	from, to string
	sum      *Summary
}

// compare writes the diff of one thing (a child, a resource, the status)
// rendered as before and after, "" when a side does not produce it.
func (w *renderingWriter) compare(name, before, after string) {
	var what string
	switch {
	case before == after:
		w.sum.Unchanged++
		return
	case before == "":
		w.sum.Created++
		what = "created"
	case after == "":
		w.sum.Pruned++
		what = "pruned"
	default:
		w.sum.Changed++
		what = "changed"
	}
	text := Unified(w.from+"/"+name, w.to+"/"+name, before, after)
	fmt.Fprintf(w.d.Out, "# %s %s/%s: %s %s\n%s", w.parent.GetKind(), w.parent.GetNamespace(), w.parent.GetName(), name, what, text)
}

// resourceYAML renders an external resource's document
// (templates.Resource.Document); "" when the rendering has none of that
// name.
func resourceYAML(r templates.Resource, exists bool) string {
	if !exists {
		return ""
	}
	return toYAML(r.Document())
}

// statusYAML renders the status fields a template writes and its readiness
// verdict; "" when it has neither.
func statusYAML(r *rendering) string {
	m := map[string]any{}
	if len(r.status) > 0 {
		m["status"] = r.status
	}
	if r.ready != nil {
		m["ready"] = *r.ready
	}
	if len(m) == 0 {
		return ""
	}
	return toYAML(m)
}

func toYAML(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprintf("# %v\n", err)
	}
	return string(b)
}
