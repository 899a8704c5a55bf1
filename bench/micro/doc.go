// Package micro holds micro-benchmarks of template evaluation, in its test
// files: the compiled MyKind example template turning one parent into its
// Deployment and status, beside a Go function building the same Deployment
// as *unstructured.Unstructured (the floor), each also run in parallel; the
// richer Storefront template; and the decoding of that Deployment: from JSON
// into unstructured, from protobuf into its Go type, and from its Go type
// into unstructured (decode_test.go). The serial evaluation benchmarks also
// report cpu-ns/op, the process's CPU time per operation.
//
//	go test -run '^$' -bench . -benchmem ./bench/micro
package micro
