package main

import "github.com/spf13/cobra"

func newReportCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "report",
		Short: "Recompute reports from a results directory (not yet available)",
		RunE:  notYet("ctrperf report"),
	}
}
