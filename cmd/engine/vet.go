package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cuengine/engine/templates"
)

type vetOptions struct {
	templates string
}

func newVetCommand() *cobra.Command {
	o := &vetOptions{}
	cmd := &cobra.Command{
		Use:   "vet",
		Short: "Check every template; exit non-zero with file:line:col messages on errors",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			set, err := templates.Load(o.templates)
			if err != nil {
				return &exitError{code: 1, msg: err.Error()}
			}
			for _, t := range set.Templates() {
				fmt.Fprintf(cmd.OutOrStdout(), "ok  %-24s %s (template hash %s)\n", t.Path, t.GVK.GroupKind().String()+"/"+t.GVK.Version, t.Hash)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.templates, "templates", "templates", "templates directory")
	return cmd
}
