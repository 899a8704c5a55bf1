package templates

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// FuzzCompileTemplate compiles arbitrary template files. Seeded with every
// template file of testdata/ and examples/ (and the corpus of templates
// written by others), the fuzzer mutates them; templates/testdata/fuzz
// holds the cases that once crashed (issue 51's `if strings.HasSuffix`).
// Load must refuse a template with an error or compile it; it must never
// panic, nor recover from one (the "internal error" of recovered: a bug
// the engine survives is a bug still). `make test` runs it for a bounded
// time (make fuzz-short), plain `go test` its corpus.
func FuzzCompileTemplate(f *testing.F) {
	for _, root := range []string{"testdata", "../examples", "../testdata"} {
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || filepath.Ext(path) != ".cue" || strings.Contains(path, "cue.mod") {
				return nil
			}
			b, err := os.ReadFile(path)
			if err == nil && strings.Contains(string(b), "\nparent:") {
				f.Add(string(b))
			}
			return nil
		})
	}
	f.Fuzz(func(t *testing.T, src string) {
		checkCompiles(t, src)
	})
}

// FuzzCompileSpec compiles templates whose parent.spec is built from CUE's
// constructs by a recipe of bytes (specRecipe): `if` with calls and
// comparisons, `for`, disjunctions, defaults, definitions, embedded
// structs, optional and required fields, pattern constraints, attributes,
// hidden checks and lets, nested. The recipe, not the text, is mutated, so
// every input is a template that parses.
func FuzzCompileSpec(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte{20, 4, 20, 21, 2, 22, 3, 23, 9})                  // ifs over a nested struct
	f.Add([]byte{24, 25, 26, 27, 28, 29, 30, 31, 5, 4, 4, 12, 13}) // for, embed, hidden, let
	f.Add([]byte("issue 51: if strings.HasSuffix(image, \":dev\")"))
	f.Fuzz(func(t *testing.T, recipe []byte) {
		checkCompiles(t, specTemplate(recipe))
	})
}

// checkCompiles loads src as the one file of a template and, when it
// compiles, uses what the engine uses of a template: its CRD, its
// constraints, vet's warnings, admission and evaluation of a parent.
func checkCompiles(t *testing.T, src string) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "t.cue"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := Load(dir)
	if err != nil {
		if strings.Contains(err.Error(), "internal error while") {
			t.Fatalf("Load recovered from a panic:\n%s\n--- template ---\n%s", err, src)
		}
		return
	}
	for _, tm := range set.Templates() {
		if tm.CRD() == nil {
			t.Fatalf("%s compiled without a CRD", tm.Path)
		}
		for _, c := range tm.Constraints() {
			if c.What == "" || c.Pos == "" {
				t.Fatalf("constraint without text or position: %+v\n--- template ---\n%s", c, src)
			}
		}
		for _, w := range append(tm.DefaultWarnings(), tm.GrowthWarnings()...) {
			if strings.Contains(w, "internal error while") {
				t.Fatalf("%s\n--- template ---\n%s", w, src)
			}
		}
		parent := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": tm.GVK.GroupVersion().String(), "kind": tm.GVK.Kind,
			"metadata": map[string]any{"name": "p", "namespace": "default", "uid": "u"},
			"spec":     map[string]any{"image": "web:dev", "replicas": int64(50), "a": "x", "b": int64(1)},
		}}
		for _, err := range []error{admitErr(tm, parent), tm.ValidateParent(parent), evalErr(tm, parent)} {
			if err != nil && (strings.Contains(err.Error(), "internal error while") || strings.Contains(err.Error(), "panicked")) {
				t.Fatalf("%v\n--- template ---\n%s", err, src)
			}
		}
	}
}

func admitErr(tm *Template, parent *unstructured.Unstructured) error {
	_, _, err := tm.Admit(parent)
	return err
}

func evalErr(tm *Template, parent *unstructured.Unstructured) error {
	_, err := tm.Evaluate(Input{Parent: parent})
	return err
}

// specTemplate is a template whose parent.spec the recipe builds; its
// children use the spec so that evaluation reads it.
func specTemplate(recipe []byte) string {
	g := &specGen{recipe: recipe}
	body := g.structBody(0)
	return `package fuzz

import (
	"list"
	"strings"
)

_uses: [strings.ToUpper("a"), list.Range(0, 1, 1)]

parent: {
	apiVersion: "fuzz.dev/v1"
	kind:       "Fuzz"
	spec: {
		image:    string
		replicas: int & >=0
` + body + `
	}
}

children: cm: {
	apiVersion: "v1"
	kind:       "ConfigMap"
	metadata: name: parent.metadata.name
	data: spec: "\(parent.spec.image)"
}
`
}

// specGen reads a recipe byte by byte; an exhausted recipe reads zeros, and
// depth bounds nesting so that every recipe ends.
type specGen struct {
	recipe []byte
	i, n   int
}

func (g *specGen) next() int {
	if g.i >= len(g.recipe) {
		return -1
	}
	b := int(g.recipe[g.i])
	g.i++
	return b
}

var fieldNames = []string{"a", "b", "c", "mode", "items", "labels", "size", "name"}

func (g *specGen) name() string {
	g.n++
	return fmt.Sprintf("%s%d", fieldNames[g.n%len(fieldNames)], g.n)
}

// structBody is up to 6 declarations (fewer at depth).
func (g *specGen) structBody(depth int) string {
	var b strings.Builder
	for range 6 - depth*2 {
		c := g.next()
		if c < 0 {
			break
		}
		b.WriteString(g.decl(c, depth))
		b.WriteString("\n")
	}
	return b.String()
}

func (g *specGen) decl(c, depth int) string {
	switch c % 12 {
	case 0:
		return g.name() + ": " + g.value(depth)
	case 1:
		return g.name() + "?: " + g.value(depth)
	case 2:
		return g.name() + "!: " + g.value(depth)
	case 3:
		return `if strings.HasSuffix(image, ":dev") {replicas: <=10, ` + g.name() + `?: ` + g.value(depth+1) + `}`
	case 4:
		return `if image == "x" {` + g.name() + `: ` + g.value(depth+1) + `}`
	case 5:
		return `if replicas > 3 && strings.Contains(image, "a") {` + g.structBody(depth+1) + `}`
	case 6:
		return `for k, v in {x: 1, y: 2} {"` + g.name() + `\(k)"?: int & >=v}`
	case 7:
		return `#D` + fmt.Sprint(g.n) + `: {x: int, y?: string}` + "\n" + g.name() + `?: #D` + fmt.Sprint(g.n)
	case 8:
		return `{` + g.name() + `?: string}` // an embedded struct
	case 9:
		return `[=~"^x-"]: string`
	case 10:
		return `_check` + fmt.Sprint(g.n) + `: true & replicas >= 0`
	default:
		n := g.name()
		return `let L` + fmt.Sprint(g.n) + ` = 1` + "\n" + n + `: *L` + fmt.Sprint(g.n) + ` | int`
	}
}

func (g *specGen) value(depth int) string {
	c := g.next()
	if c < 0 {
		c = 0
	}
	if depth > 2 {
		c %= 10 // scalars only
	}
	switch c % 18 {
	case 0:
		return "string"
	case 1:
		return "int & >=0 & <=100"
	case 2:
		return "*1 | int"
	case 3:
		return `*"a" | "b" | "c"`
	case 4:
		return `string & strings.MaxRunes(5)`
	case 5:
		return `string & =~"^a" & !="ab"`
	case 6:
		return "int & >=replicas"
	case 7:
		return `int @go(X) @immutable()`
	case 8:
		return "bool | *false"
	case 9:
		return "null | string"
	case 10:
		return "{" + g.structBody(depth+1) + "}"
	case 11:
		return "[..." + g.value(depth+1) + "]"
	case 12:
		return "{[string]: " + g.value(depth+1) + "}"
	case 13:
		return "{a: string} | {b: int}"
	case 14:
		return "*close({app: \"x\"}) | {[string]: string}"
	case 15:
		return "[" + g.value(depth+1) + ", ...]"
	case 16:
		return "strings.HasPrefix(\"v\")"
	default:
		return "[...{port: int, target: int & >=port}]"
	}
}
