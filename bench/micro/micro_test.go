package micro_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cuengine/engine/templates"
)

// myKind is the parent kind of the example template.
var myKind = schema.GroupVersionKind{Group: "webapp.my.domain", Version: "v1", Kind: "MyKind"}

// benchCase is one reconcile situation: a new parent (nothing observed) or
// a settled one whose Deployment is observed.
type benchCase struct {
	name  string
	input func(tb testing.TB) templates.Input
}

var cases = []benchCase{
	{"create", func(tb testing.TB) templates.Input {
		return templates.Input{Parent: newParent(tb, true)}
	}},
	{"observed", func(tb testing.TB) templates.Input {
		return templates.Input{Parent: newParent(tb, false),
			Observed: map[string]any{"deployment": object(tb, deploymentYAML)}}
	}},
}

// load compiles the example templates once and returns MyKind's.
func load(tb testing.TB) *templates.Template {
	tb.Helper()
	set, err := templates.Load("../../examples/templates")
	if err != nil {
		tb.Fatal(err)
	}
	t, ok := set.Lookup(myKind)
	if !ok {
		tb.Fatal("no template for MyKind in examples/templates")
	}
	return t
}

// floor is the least any controller must do per parent: build the same
// Deployment and status in Go, as unstructured.
func floor(in templates.Input) (*unstructured.Unstructured, map[string]any) {
	name, _, _ := unstructured.NestedString(in.Parent.Object, "spec", "deploymentName")
	replicas, found, _ := unstructured.NestedInt64(in.Parent.Object, "spec", "replicas")
	if !found {
		replicas = 1
	}
	labels := func() map[string]any { return map[string]any{"deployment-name": name} }
	d := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1",
		"kind":       "Deployment",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"replicas": replicas,
			"selector": map[string]any{"matchLabels": labels()},
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels()},
				"spec": map[string]any{"containers": []any{
					map[string]any{"name": "nginx", "image": "nginx:latest"},
				}},
			},
		},
	}}
	var ready int64
	if obs, ok := in.Observed["deployment"].(map[string]any); ok {
		ready, _, _ = unstructured.NestedInt64(obs, "status", "readyReplicas")
	}
	return d, map[string]any{"readyReplicas": ready}
}

// TestFloorMatchesTemplate keeps the floor honest: it builds exactly what
// the template does.
func TestFloorMatchesTemplate(t *testing.T) {
	tpl := load(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := c.input(t)
			res, err := tpl.Evaluate(in)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Children) != 1 {
				t.Fatalf("got %d children, want 1", len(res.Children))
			}
			d, status := floor(in)
			if !equality.Semantic.DeepEqual(res.Children[0].Object.Object, d.Object) {
				t.Errorf("floor Deployment differs from the template's:\ntemplate: %v\nfloor:    %v", res.Children[0].Object.Object, d.Object)
			}
			if !equality.Semantic.DeepEqual(res.Status, status) {
				t.Errorf("floor status %v differs from the template's %v", status, res.Status)
			}
		})
	}
}

// distinct returns n copies of an input that differ in the parent's
// deploymentName, a field the template reads (the template is only given
// what it reads): each is a new evaluation, never one it remembers.
func distinct(tb testing.TB, in templates.Input, n int) []templates.Input {
	out := make([]templates.Input, n)
	for i := range out {
		p := in.Parent.DeepCopy()
		if err := unstructured.SetNestedField(p.Object, fmt.Sprintf("web-%05d", i), "spec", "deploymentName"); err != nil {
			tb.Fatal(err)
		}
		out[i] = templates.Input{Parent: p, Observed: in.Observed}
	}
	return out
}

// inputs is more than the template remembers (256), so cycling through
// them always evaluates.
const inputs = 1024

// BenchmarkEvaluate is the compiled template evaluating one parent it has
// not seen: the cost that matters per reconcile.
func BenchmarkEvaluate(b *testing.B) {
	tpl := load(b)
	for _, c := range cases {
		ins := distinct(b, c.input(b), inputs)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := tpl.Evaluate(ins[i%inputs]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkEvaluateRepeat evaluates the same input again: the reconcile
// that follows the engine's own write, answered from the template's memory.
func BenchmarkEvaluateRepeat(b *testing.B) {
	tpl := load(b)
	for _, c := range cases {
		in := c.input(b)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tpl.Evaluate(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEvaluateParallel is BenchmarkEvaluate from GOMAXPROCS
// goroutines sharing the compiled template, as reconcile workers do.
func BenchmarkEvaluateParallel(b *testing.B) {
	tpl := load(b)
	for _, c := range cases {
		ins := distinct(b, c.input(b), inputs)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var next atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := tpl.Evaluate(ins[next.Add(1)%inputs]); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkFloor is the Go function building the same Deployment.
func BenchmarkFloor(b *testing.B) {
	for _, c := range cases {
		in := c.input(b)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				floor(in)
			}
		})
	}
}

// BenchmarkFloorParallel is BenchmarkFloor from GOMAXPROCS goroutines.
func BenchmarkFloorParallel(b *testing.B) {
	for _, c := range cases {
		in := c.input(b)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					floor(in)
				}
			})
		})
	}
}
