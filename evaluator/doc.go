// Package evaluator runs template evaluations, conversions and validations
// in processes of their own (Pool), where one that runs away can be
// stopped: CUE (v0.17.1) cannot interrupt an evaluation, so one that runs
// past --evaluation-timeout in the engine's process keeps its CPU and
// memory until it ends. A process is killed at the timeout or past its
// memory (Options.MemoryBytes, polled from /proc), and its evaluation
// refused with a *LimitError; the next request starts a new one.
//
// The processes are the engine's own binary (`engine evaluator`, which
// calls Serve): each compiles a template once from its files
// (templates.Restore, as a stored revision is), sent with the first
// request for it, and answers one request at a time over its standard
// input and output (wire.go). The pool shares its processes by kind and,
// within a kind, by namespace (Options.PerKind, PerNamespace), so one
// tenant's runaways hold at most their share.
//
// Which evaluations come here is package render's choice (render.Budget):
// it imports templates only.
package evaluator
