package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set by the Makefile with -ldflags "-X main.version=...".
var version = "dev"

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the engine's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cueVersion := "unknown"
			if info, ok := debug.ReadBuildInfo(); ok {
				for _, d := range info.Deps {
					if d.Path == "cuelang.org/go" {
						cueVersion = d.Version
					}
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "engine %s (cue %s, %s, %s/%s)\n", version, cueVersion, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}
