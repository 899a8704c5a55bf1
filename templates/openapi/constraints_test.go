package openapi

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/token"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// compileSpec compiles one file, w.cue, whose parent.spec is spec, and
// returns the spec's value, the file and a position formatter as the
// templates package gives Constraints: file:line:col under the directory.
func compileSpec(t *testing.T, imports, spec string) (cue.Value, []string, func(token.Pos) string) {
	t.Helper()
	dir := t.TempDir()
	f := filepath.Join(dir, "w.cue")
	src := "package w\n" + imports + "\nparent: {\n\tapiVersion: \"x.dev/v1\"\n\tkind: \"W\"\n\tspec: {\n" + spec + "\n\t}\n}\n"
	require.NoError(t, os.WriteFile(f, []byte(src), 0o644))
	v := cuecontext.New().CompileString(src, cue.Filename(f))
	require.NoError(t, v.Err())
	pos := func(p token.Pos) string {
		if !p.IsValid() || p.Filename() != f {
			return ""
		}
		return fmt.Sprintf("w.cue:%d:%d", p.Line(), p.Column())
	}
	return v.LookupPath(cue.ParsePath("parent.spec")), []string{f}, pos
}

func TestConstraintsBeyondTheCRD(t *testing.T) {
	for _, tc := range []struct {
		name, imports, spec string
		want                []Constraint
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
			want: []Constraint{{Pos: "w.cue:9:3", Path: "spec.replicas", What: ">=minReplicas"}}},
		{name: "a second pattern", spec: `
		name: string & =~"^a" & =~"b$"`,
			want: []Constraint{{Pos: "w.cue:8:3", Path: "spec.name", What: `=~"^a"`}}},
		{name: "not equal and not matching", spec: `
		zone: string & !="bad"
		tag: string & !~"^x"
		offset: int & >=-5`,
			want: []Constraint{
				{Pos: "w.cue:8:3", Path: "spec.zone", What: `!="bad"`},
				{Pos: "w.cue:9:3", Path: "spec.tag", What: `!~"^x"`},
			}},
		{name: "a fixed value", spec: `
		small: int8
		version: "v1"`,
			want: []Constraint{{Pos: "w.cue:9:3", Path: "spec.version", What: `"v1"`}}},
		{name: "a validator from a package", imports: `import "strings"`, spec: `
		tag: strings.HasPrefix("v")`,
			want: []Constraint{{Pos: "w.cue:8:3", Path: "spec.tag", What: `strings.HasPrefix("v")`}}},
		{name: "a disjunction of shapes", spec: `
		shape: {a: string} | {b: int}`,
			want: []Constraint{{Pos: "w.cue:8:3", Path: "spec.shape", What: "{a: string} | {b: int}"}}},
		{name: "a check in a hidden field", spec: `
		lo: int
		hi: int
		_ordered: true & hi > lo`,
			want: []Constraint{{Pos: "w.cue:10:3", Path: "spec._ordered", What: "hi > lo & {true}"}}},
		{name: "a check under an if", spec: `
		lo: int
		hi: int
		if hi < lo {
			hi: "hi must not be below lo" & false
		}`,
			want: []Constraint{{Pos: "w.cue:10:3", Path: "spec", What: "if hi < lo {hi: \"hi must not be below lo\" & false}"}}},
		{name: "a check under an if with a call (issue 51)", imports: `import "strings"`, spec: `
		image: string
		replicas: int & >=0
		if strings.HasSuffix(image, ":dev") {replicas: <=10}`,
			want: []Constraint{{Pos: "w.cue:10:3", Path: "spec", What: `if strings.HasSuffix(image, ":dev") {replicas: <=10}`}}},
		{name: "inside a list item", spec: `
		ports: [...{port: int, target: int & >=port}]`,
			want: []Constraint{{Pos: "w.cue:8:26", Path: "spec.ports[].target", What: ">=port"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, files, pos := compileSpec(t, tc.imports, tc.spec)
			assert.Equal(t, tc.want, Constraints(spec, files, pos))
		})
	}
}

// TestDefinitionsReachTheCRD: a Kubebuilder type with an enum or bounds
// becomes a CUE definition its fields name (the Kubebuilder book's
// multi-version CronJob: `concurrencyPolicy?: #ConcurrencyPolicy`,
// testdata/corpus/templates/cronjob.cue). The CRD gets its enum and bounds
// as if they were written in the field, and nothing is left for the
// admission webhook alone.
func TestDefinitionsReachTheCRD(t *testing.T) {
	spec, files, pos := compileSpec(t, "", `
		#Policy: "Allow" | "Forbid" | "Replace"
		#Port: int & >=1 & <=65535
		#Alias: #Policy
		policy?: #Policy
		alias: #Alias
		port: #Port`)
	s := SchemaOf(spec)
	for _, f := range []string{"policy", "alias"} {
		var enum []string
		for _, e := range s.Properties[f].Enum {
			enum = append(enum, string(e.Raw))
		}
		assert.Equal(t, []string{`"Allow"`, `"Forbid"`, `"Replace"`}, enum, f)
	}
	port := s.Properties["port"]
	require.NotNil(t, port.Minimum)
	require.NotNil(t, port.Maximum)
	assert.Equal(t, []float64{1, 65535}, []float64{*port.Minimum, *port.Maximum})
	assert.Empty(t, Constraints(spec, files, pos), "everything is in the CRD")
}
