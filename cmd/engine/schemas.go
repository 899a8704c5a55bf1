package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/cuengine/engine/contract"
	"github.com/cuengine/engine/templates"
	"github.com/cuengine/engine/templates/openapi"
)

// addCRDsFlag adds --crds, the directories of CRD files whose kinds children
// may be instances of, to an offline command.
func addCRDsFlag(f *pflag.FlagSet, dirs *[]string) {
	f.StringSliceVar(dirs, "crds", nil, "directories of CustomResourceDefinition YAML files: the schemas of child kinds that are neither built in nor the templates' own (repeatable)")
}

// loadOffline loads the templates with the CRDs of the --crds directories
// and prints a warning for each child kind without a schema. Its errors are
// an *exitError, but for the templates' own (a *templates.LoadError).
func loadOffline(dir string, crdDirs []string, stderr io.Writer) (*templates.Set, error) {
	var opts templates.LoadOptions
	for _, d := range crdDirs {
		crds, err := openapi.ReadCRDs(d)
		if err != nil {
			return nil, &exitError{code: 1, msg: "--crds: " + err.Error()}
		}
		opts.CRDs = append(opts.CRDs, crds...)
	}
	set, err := templates.LoadWith(dir, opts)
	if err != nil {
		return nil, err
	}
	for _, u := range set.Unchecked() {
		if len(crdDirs) > 0 && u.Err == nil {
			// With the cluster's CRDs given, a kind nobody defines is one
			// the cluster does not serve.
			fmt.Fprintf(stderr, "warning: %s: children.%s: kind %s is missing: not built in, not a template's and not in --crds; "+
				"the engine refuses the child (Synced=False, reason ChildRefused) until a CRD serves the kind, and retries when one is installed\n",
				u.Template, u.Child, contract.KindString(u.Kind))
			continue
		}
		fmt.Fprintf(stderr, "warning: %s\n", u)
	}
	return set, nil
}

// asExitError makes a load error the command's exit status 1 and message.
func asExitError(err error) error {
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	return &exitError{code: 1, msg: err.Error()}
}
