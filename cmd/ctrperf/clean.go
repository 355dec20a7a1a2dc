package main

import "github.com/spf13/cobra"

func newCleanCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "clean",
		Short: "Remove everything a killed run left behind (not yet available)",
		RunE:  notYet("ctrperf clean"),
	}
}
