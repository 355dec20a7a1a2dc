package main

import "github.com/spf13/cobra"

func newImagesCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "images",
		Short: "Build, list and remove ctrperf's local images (not yet available)",
		RunE:  notYet("ctrperf images"),
	}
}
