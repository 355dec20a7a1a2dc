package main

import "github.com/spf13/cobra"

func newLoadCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "load",
		Short: "Drive load against an endpoint (not yet available)",
		RunE:  notYet("ctrperf load"),
	}
}
