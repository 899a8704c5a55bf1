package openapi

import (
	"testing"

	"cuelang.org/go/cue/cuecontext"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// BenchmarkChildSchemaStartup is what every Load pays for the built-in
// schemas (none is kept between loads): decoding them and writing the
// Deployment's as CUE.
func BenchmarkChildSchemaStartup(b *testing.B) {
	deployment := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	for b.Loop() {
		kinds, err := builtinSchemas()
		if err != nil {
			b.Fatal(err)
		}
		_ = cueOfKind(kinds[deployment])
	}
}

// BenchmarkChildSchemaBuild is what every Load pays per child kind: the
// kind's CUE compiled in the Load's context (here the Deployment's).
func BenchmarkChildSchemaBuild(b *testing.B) {
	kinds, err := builtinSchemas()
	if err != nil {
		b.Fatal(err)
	}
	text := cueOfKind(kinds[schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}])
	for b.Loop() {
		if err := cuecontext.New().CompileString(text).Err(); err != nil {
			b.Fatal(err)
		}
	}
}
