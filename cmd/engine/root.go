package main

import (
	"github.com/spf13/cobra"
)

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "engine",
		Short: "Reconcile custom resources into what their CUE templates describe",
		Long: `engine turns any custom resource into the Kubernetes objects and external
resources it should own. A CUE template per kind maps the parent object to its
desired children and its status; templates live in a directory and hot-reload.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newRunCommand(),
		newDevCommand(),
		newRenderCommand(),
		newDiffCommand(),
		newRolloutCommand(),
		newVetCommand(),
		newGraphCommand(),
		newTestCommand(),
		newRBACCommand(),
		newCRDsCommand(),
		newVersionCommand(),
		newEvaluatorCommand(),
	)
	root.AddCommand(newObjectCommands()...)
	return root
}
