package main

import "github.com/spf13/cobra"

func newCompareCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "compare",
		Short: "Compare two result sets (not yet available)",
		RunE:  notYet("ctrperf compare"),
	}
}
