package main

import (
	"github.com/spf13/cobra"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "ctrperf",
		Short: "What does a container cost my workload, and which configuration wins it back?",
		Long: `ctrperf runs one workload on bare metal and in Docker containers across a
matrix of configurations, drives real load, samples the system, and reports
every configuration against the baseline with confidence intervals.
ctrperf isolate keeps quiet containers fast when a neighbour gets hot.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newBenchCmd(),
		newReportCmd(),
		newCompareCmd(),
		newLoadCmd(),
		newObserveCmd(),
		newIsolateCmd(),
		newImagesCmd(),
		newDoctorCmd(),
		newCleanCmd(),
		newVersionCmd(),
	)
	return root
}
