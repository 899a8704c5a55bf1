// Package micro holds micro-benchmarks of template evaluation, in its test
// files: the compiled MyKind example template turning one parent into its
// Deployment and status, beside a Go function building the same Deployment
// as *unstructured.Unstructured (the floor), each also run in parallel; and
// the richer Storefront template. The serial ones also report cpu-ns/op,
// the process's CPU time per operation.
//
//	go test -run '^$' -bench . -benchmem ./bench/micro
package micro
