package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

type vetOptions struct {
	templates string
	crds      []string
}

func newVetCommand() *cobra.Command {
	o := &vetOptions{}
	cmd := &cobra.Command{
		Use:   "vet",
		Short: "Check every template; exit non-zero with file:line:col messages on errors",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			set, err := loadOffline(o.templates, o.crds, cmd.ErrOrStderr())
			if err != nil {
				return asExitError(err)
			}
			printRBACWarnings(cmd.ErrOrStderr(), set)
			for _, t := range set.Templates() {
				for _, w := range t.Graph().Warnings() {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", w)
				}
				for _, w := range t.DefaultWarnings() {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", w)
				}
				for _, w := range t.GrowthWarnings() {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", w)
				}
				for _, w := range t.EngineLabelWarnings() {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", w)
				}
				for _, w := range t.VersionWarnings() {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", w)
				}
				for _, c := range t.Constraints() {
					fmt.Fprintf(cmd.ErrOrStderr(), "note: %s: parent.%s: %s is not in the CRD: the engine's admission webhook checks it\n", c.Pos, c.Path, c.What)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "ok  %-24s %s (template hash %s)\n", t.Path, t.GVK.GroupKind().String()+"/"+t.GVK.Version, t.Hash)
			}
			// A field lost converting a test case's parent between
			// versions and back (testversions.go).
			lost, err := vetRoundTrips(set, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if lost > 0 {
				return &exitError{code: 1, msg: plural(lost, "problem") + " converting the test cases' parents between versions"}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.templates, "templates", "templates", "templates directory")
	addCRDsFlag(cmd.Flags(), &o.crds)
	return cmd
}
