package main

import "github.com/spf13/cobra"

func newBenchCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "bench",
		Short: "Run a benchmark plan (not yet available)",
		RunE:  notYet("ctrperf bench"),
	}
}
