// Package micro holds micro-benchmarks of template evaluation, in its test
// files: the compiled MyKind example template turning one parent into its
// Deployment and status, beside a Go function building the same Deployment
// as *unstructured.Unstructured (the floor), each also run in parallel.
//
//	go test -run '^$' -bench . -benchmem ./bench/micro
package micro
