package evaluator

import "os"

// ServeIfChild makes the running binary an evaluator process when a pool
// started it with the argument "evaluator" (Options.Command: the test
// binaries of packages that run a pool, as `engine evaluator` is for the
// engine): it serves and exits. Otherwise it returns at once.
func ServeIfChild() {
	if len(os.Args) < 2 || os.Args[1] != "evaluator" {
		return
	}
	if err := Serve(os.Stdin, os.Stdout); err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
	os.Exit(0)
}
