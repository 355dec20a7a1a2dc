package main

import "github.com/spf13/cobra"

func newObserveCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "observe",
		Short: "Sample disks, CPUs, interrupts, containers live (not yet available)",
		RunE:  notYet("ctrperf observe"),
	}
}
