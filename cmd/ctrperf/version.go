package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"ctrperf/internal/version"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print ctrperf's version, commit, build date and Go version (also --version)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), version.Get())
			return nil
		},
	}
}
