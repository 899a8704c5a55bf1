package micro_test

import (
	"bytes"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

// decodeFixtures returns the example Deployment as the apiserver sends it in
// JSON and in protobuf, and as a typed object.
func decodeFixtures(tb testing.TB) (jsonBytes, protoBytes []byte, typed *appsv1.Deployment) {
	tb.Helper()
	u := &unstructured.Unstructured{Object: object(tb, deploymentYAML)}
	jsonBytes, err := u.MarshalJSON()
	if err != nil {
		tb.Fatal(err)
	}
	typed = &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, typed); err != nil {
		tb.Fatal(err)
	}
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(typed, &buf); err != nil {
		tb.Fatal(err)
	}
	return jsonBytes, buf.Bytes(), typed
}

// BenchmarkDecodeDeployment compares what a watch event of a Deployment
// costs the engine: decoding JSON into an unstructured object (how every
// child was cached), decoding protobuf into the typed object (how a
// built-in child is cached), and converting a typed object to unstructured
// (what a reconcile pays per child it reads).
func BenchmarkDecodeDeployment(b *testing.B) {
	jsonBytes, protoBytes, typed := decodeFixtures(b)
	b.Run("json-unstructured", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(jsonBytes); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("protobuf-typed", func(b *testing.B) {
		decoder := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := decoder.Decode(protoBytes, nil, &appsv1.Deployment{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("typed-to-unstructured", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed); err != nil {
				b.Fatal(err)
			}
		}
	})
}
