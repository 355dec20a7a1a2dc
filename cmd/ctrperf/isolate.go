package main

import "github.com/spf13/cobra"

func newIsolateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "isolate",
		Short: "Real-time CPU and interrupt isolation controller (not yet available)",
		RunE:  notYet("ctrperf isolate"),
	}
}
