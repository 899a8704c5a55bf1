package templates

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzEvaluate feeds arbitrary specs to the MyKind and Widget templates.
// Evaluation must return a result or a positioned *Error; it must never panic
// (Evaluate recovers panics into errors, so those are failures here too).
// `make fuzz` runs it for a minute; CI runs the seed corpus.
func FuzzEvaluate(f *testing.F) {
	f.Add(`{"deploymentName":"mykind","replicas":1}`)
	f.Add(`{"deploymentName":"","replicas":-1}`)
	f.Add(`{"deploymentName":7,"replicas":"x","foo":{"bar":[1,2]}}`)
	f.Add(`{"count":3,"size":"large","mode":"b"}`)
	f.Add(`{"replicas":1e300}`)
	f.Add(`null`)
	f.Add(`[]`)
	mk := loadOne(f, examples, "mykind")
	widget := loadOne(f, "testdata/eval")
	f.Fuzz(func(t *testing.T, specJSON string) {
		var spec any
		if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
			return
		}
		for _, tm := range []*Template{mk, widget} {
			parent := mykind(nil)
			parent.SetAPIVersion(tm.GVK.GroupVersion().String())
			parent.SetKind(tm.GVK.Kind)
			parent.Object["spec"] = spec
			res, err := tm.Evaluate(Input{Parent: parent})
			if err != nil {
				var te *Error
				if !errors.As(err, &te) {
					t.Fatalf("%s: error of type %T, want *Error: %v", tm.Path, err, err)
				}
				if strings.Contains(err.Error(), "panicked") {
					t.Fatalf("%s: %v", tm.Path, err)
				}
				continue
			}
			for _, c := range res.Children {
				if c.Object.GetName() == "" || c.Object.GetKind() == "" {
					t.Fatalf("%s: child %s without name or kind", tm.Path, c.Name)
				}
				c.Object.DeepCopy() // Kubernetes must be able to copy what we produce
			}
		}
	})
}
