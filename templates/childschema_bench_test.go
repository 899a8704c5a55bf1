package templates

import (
	"testing"
)

// BenchmarkLoadExamples is the cost of a reload of the example templates,
// the schema check of their children included.
func BenchmarkLoadExamples(b *testing.B) {
	for b.Loop() {
		if _, err := Load(examples); err != nil {
			b.Fatal(err)
		}
	}
}
