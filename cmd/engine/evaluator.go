package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cuengine/engine/evaluator"
)

// newEvaluatorCommand is `engine evaluator`, an evaluator process of the
// engine's pool (package evaluator): started by `engine run`, not by
// hand, so hidden from the help.
func newEvaluatorCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "evaluator",
		Short:  "Serve the engine's evaluations on standard input and output (started by engine run)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return evaluator.Serve(os.Stdin, os.Stdout)
		},
	}
}

// evaluatorOptions are the flags of the evaluator processes.
type evaluatorOptions struct {
	processes int
	memory    string
	total     string
	// containerLimit reads the container's memory limit (its cgroup's),
	// for the default of --evaluator-total-memory.
	containerLimit func() (uint64, error)
}

// totalShare is the share of the container's memory limit the engine and
// its evaluator processes may hold together by default: the kernel kills
// the whole container at the limit (cgroup v2 kills the group), so an
// evaluator is stopped first, with a tenth left for page cache and the
// 20 ms between two reads of the resident sets.
const totalShare = 0.9

func (e *evaluatorOptions) addFlags(f *pflag.FlagSet) {
	f.IntVar(&e.processes, "evaluator-processes", evaluator.DefaultProcesses, "evaluator processes, at niceness 19, the evaluations that may run away go to (those of a template engine vet warns can grow with a spec field, and of an object whose evaluation ran past --evaluation-timeout before), and the webhook's conversions and validations, where one past the timeout or --evaluator-memory is stopped; one kind holds at most all but one, one namespace of a kind all but two (0: everything evaluates in the engine's process, as CUE cannot stop there)")
	f.StringVar(&e.memory, "evaluator-memory", "512Mi", "resident memory past which an evaluator process is killed and its evaluation refused (Synced=False EvaluationMemoryExceeded); the engine's memory is at most its own plus --evaluator-processes times this")
	f.StringVar(&e.total, "evaluator-total-memory", "auto", "resident memory the engine and its evaluator processes may hold together: past it idle evaluator processes are stopped, then the busy one holding the most (more than its share, this over --evaluator-processes plus one), its evaluation refused as past --evaluator-memory; auto: nine tenths of the container's memory limit, none without one; 0: none")
}

// totalBytes is --evaluator-total-memory in bytes, 0 for none.
func (e *evaluatorOptions) totalBytes() (uint64, error) {
	if e.total != "auto" {
		q, err := resource.ParseQuantity(e.total)
		if err != nil || q.Sign() < 0 {
			return 0, fmt.Errorf("--evaluator-total-memory: %q is not auto or a quantity such as 900Mi", e.total)
		}
		return uint64(q.Value()), nil
	}
	if e.containerLimit == nil {
		return 0, nil
	}
	limit, err := e.containerLimit()
	if err != nil || limit == 0 || limit >= 1<<62 {
		return 0, nil // no limit, or none readable: setMemoryLimit says which
	}
	return uint64(float64(limit) * totalShare), nil
}

// pool returns the pool of evaluator processes, nil with
// --evaluator-processes=0; it starts no process until one is needed.
func (e *evaluatorOptions) pool() (*evaluator.Pool, error) {
	if e.processes < 0 {
		return nil, fmt.Errorf("--evaluator-processes: %d is negative", e.processes)
	}
	if e.processes == 0 {
		return nil, nil
	}
	q, err := resource.ParseQuantity(e.memory)
	if err != nil || q.Sign() <= 0 {
		return nil, fmt.Errorf("--evaluator-memory: %q is not a positive quantity such as 512Mi", e.memory)
	}
	total, err := e.totalBytes()
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the engine's binary for its evaluator processes: %w", err)
	}
	return evaluator.New(evaluator.Options{Processes: e.processes, MemoryBytes: uint64(q.Value()), TotalBytes: total, Command: []string{self, "evaluator"}}), nil
}
