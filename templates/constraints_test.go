package templates

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cuengine/engine/templates/openapi"
)

// loadSpec compiles one template whose parent.spec is spec.
func loadSpec(t *testing.T, imports, spec string) *Template {
	t.Helper()
	dir := t.TempDir()
	src := "package w\n" + imports + "\nparent: {\n\tapiVersion: \"x.dev/v1\"\n\tkind: \"W\"\n\tspec: {\n" + spec + "\n\t}\n}\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "w.cue"), []byte(src), 0o644))
	set, err := Load(dir)
	require.NoError(t, err)
	return set.Templates()[0]
}

func TestConstraintsBeyondTheCRD(t *testing.T) {
	for _, tc := range []struct {
		name, imports, spec string
		want                []openapi.Constraint
	}{
		{name: "bounds, lengths, one pattern, enums and defaults fit", imports: `import "strings"`, spec: `
		replicas: *1 | int32 & >=0 & <=10
		name: string & strings.MaxRunes(63) & strings.MinRunes(1) & =~"^[a-z]+$"
		mode: *"a" | "b" | "c"
		size: uint
		ratio?: float & >0.5
		labels: [string]: string
		ports: [...{port: int & >0, name?: string}]
		anything: _
		defaults: *{app: "x"} | {[string]: string}
		closed: *close({app: "x"}) | {[string]: string}
		args: *["a", "b"] | [...string]
		res: *{cpu: "1"} | {cpu: string, memory?: string}`},
		{name: "a bound read from another field", spec: `
		minReplicas: *1 | int & >=0
		replicas: *2 | int & >=minReplicas & <=10`,
			want: []openapi.Constraint{{Pos: "w.cue:9:3", Path: "spec.replicas", What: ">=minReplicas"}}},
		{name: "a second pattern", spec: `
		name: string & =~"^a" & =~"b$"`,
			want: []openapi.Constraint{{Pos: "w.cue:8:3", Path: "spec.name", What: `=~"^a"`}}},
		{name: "not equal and not matching", spec: `
		zone: string & !="bad"
		tag: string & !~"^x"
		offset: int & >=-5`,
			want: []openapi.Constraint{
				{Pos: "w.cue:8:3", Path: "spec.zone", What: `!="bad"`},
				{Pos: "w.cue:9:3", Path: "spec.tag", What: `!~"^x"`},
			}},
		{name: "a fixed value", spec: `
		small: int8
		version: "v1"`,
			want: []openapi.Constraint{{Pos: "w.cue:9:3", Path: "spec.version", What: `"v1"`}}},
		{name: "a validator from a package", imports: `import "strings"`, spec: `
		tag: strings.HasPrefix("v")`,
			want: []openapi.Constraint{{Pos: "w.cue:8:3", Path: "spec.tag", What: `strings.HasPrefix("v")`}}},
		{name: "a disjunction of shapes", spec: `
		shape: {a: string} | {b: int}`,
			want: []openapi.Constraint{{Pos: "w.cue:8:3", Path: "spec.shape", What: "{a: string} | {b: int}"}}},
		{name: "a check in a hidden field", spec: `
		lo: int
		hi: int
		_ordered: true & hi > lo`,
			want: []openapi.Constraint{{Pos: "w.cue:10:3", Path: "spec._ordered", What: "hi > lo & {true}"}}},
		{name: "a check under an if", spec: `
		lo: int
		hi: int
		if hi < lo {
			hi: "hi must not be below lo" & false
		}`,
			want: []openapi.Constraint{{Pos: "w.cue:10:3", Path: "spec", What: "if hi < lo {hi: \"hi must not be below lo\" & false}"}}},
		{name: "inside a list item", spec: `
		ports: [...{port: int, target: int & >=port}]`,
			want: []openapi.Constraint{{Pos: "w.cue:8:26", Path: "spec.ports[].target", What: ">=port"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmpl := loadSpec(t, tc.imports, tc.spec)
			assert.Equal(t, tc.want, tmpl.Constraints())
			assert.Equal(t, len(tc.want) > 0, tmpl.NeedsAdmission())
		})
	}
}
