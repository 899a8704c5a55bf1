package jsonhash

import (
	"crypto/sha256"
	"encoding/json"
	"testing"
)

func benchValue() map[string]any {
	return map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web-123", "namespace": "default", "labels": map[string]any{"app": "web", "engine.cuengine.dev/managed-by": "engine", "engine.cuengine.dev/child": "deployment"},
			"ownerReferences": []any{map[string]any{"apiVersion": "webapp.my.domain/v1", "kind": "MyKind", "name": "web-123", "uid": "0f0e0d0c-0b0a-0908-0706-050403020100", "controller": true, "blockOwnerDeletion": true}}},
		"spec": map[string]any{"replicas": int64(3), "selector": map[string]any{"matchLabels": map[string]any{"app": "web-123"}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "web-123"}},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "web", "image": "nginx:1.27", "ports": []any{map[string]any{"containerPort": int64(80)}}}}}}}}
}

// BenchmarkSum: Sum against json.Marshal and sha256 of a Deployment.
func BenchmarkSum(b *testing.B) {
	v := benchValue()
	b.Run("jsonhash", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = Sum(v)
		}
	})
	b.Run("marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			j, _ := json.Marshal(v)
			_ = sha256.Sum256(j)
		}
	})
}
