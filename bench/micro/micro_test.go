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

// myKind and storefront are the parent kinds of two example templates.
var (
	myKind     = schema.GroupVersionKind{Group: "webapp.my.domain", Version: "v1", Kind: "MyKind"}
	storefront = schema.GroupVersionKind{Group: "apps.cuengine.dev", Version: "v1", Kind: "Storefront"}
)

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

// load compiles the example templates and returns the one for kind
// (MyKind's unless named).
func load(tb testing.TB, kind ...schema.GroupVersionKind) *templates.Template {
	tb.Helper()
	set, err := templates.Load("../../examples/templates")
	if err != nil {
		tb.Fatal(err)
	}
	gvk := myKind
	if len(kind) > 0 {
		gvk = kind[0]
	}
	t, ok := set.Lookup(gvk)
	if !ok {
		tb.Fatalf("no template for %s in examples/templates", gvk.Kind)
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

// distinct returns n copies of an input that differ in the parent's name
// and in one string of its spec, read by the template (a template is only
// given what it reads): each is a new evaluation, never one it remembers.
func distinct(tb testing.TB, in templates.Input, field string, n int) []templates.Input {
	orig, _, _ := unstructured.NestedString(in.Parent.Object, "spec", field)
	out := make([]templates.Input, n)
	for i := range out {
		p := in.Parent.DeepCopy()
		p.SetName(fmt.Sprintf("%s-%05d", in.Parent.GetName(), i))
		if err := unstructured.SetNestedField(p.Object, fmt.Sprintf("%s-%05d", orig, i), "spec", field); err != nil {
			tb.Fatal(err)
		}
		out[i] = templates.Input{Parent: p, Observed: in.Observed}
	}
	return out
}

// inputs is more than the template remembers (about 1,800 MyKind results
// fit its budget), so cycling through them always evaluates.
const inputs = 4096

// BenchmarkEvaluate is the compiled template evaluating one parent it has
// not seen: the cost that matters per reconcile.
func BenchmarkEvaluate(b *testing.B) {
	benchmarkEvaluate(b, load(b), cases, "deploymentName")
}

// storefrontCases are a new Storefront (nothing observed: the bucket
// only) and a settled one (the bucket and the Deployment observed).
var storefrontCases = []benchCase{
	{"create", func(tb testing.TB) templates.Input {
		return templates.Input{Parent: storefrontParent(tb, true)}
	}},
	{"observed", func(tb testing.TB) templates.Input {
		return templates.Input{Parent: storefrontParent(tb, false), Observed: storefrontObserved(tb)}
	}},
}

// BenchmarkEvaluateStorefront is BenchmarkEvaluate for the richer
// Storefront template: a resource, a Deployment under a condition, two
// status fields.
func BenchmarkEvaluateStorefront(b *testing.B) {
	benchmarkEvaluate(b, load(b, storefront), storefrontCases, "bucketName")
}

// benchmarkEvaluate runs each case through the template, on inputs it has
// not seen (that differ in the spec's field), and also reports the
// process's CPU time per evaluation.
func benchmarkEvaluate(b *testing.B, tpl *templates.Template, cases []benchCase, field string) {
	for _, c := range cases {
		ins := distinct(b, c.input(b), field, inputs)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			cpu := cpuTime()
			for b.Loop() {
				if _, err := tpl.Evaluate(ins[i%inputs]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			reportCPU(b, cpu)
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
		ins := distinct(b, c.input(b), "deploymentName", inputs)
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
			cpu := cpuTime()
			for b.Loop() {
				floor(in)
			}
			reportCPU(b, cpu)
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
