package main

import (
	"github.com/spf13/cobra"

	"ctrperf/internal/owner"
)

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "ctrperf",
		Short: "What does a container cost my workload, and which configuration wins it back?",
		Long: `ctrperf runs one workload on bare metal and in Docker containers across a
matrix of configurations, drives real load, samples the system, and reports
every configuration against the baseline with confidence intervals.
ctrperf isolate keeps quiet containers fast when a neighbour gets hot.

Commands that print results take --format (table, json, and md or csv where
they fit; --json is short for --format json). JSON output carries
schema_version and ctrperf_version.

` + exitCodesHelp,
	}
	// Where `bench run` records that it owns what it creates and `clean`
	// looks; hidden: only tests need another place.
	root.PersistentFlags().String(ownersDirFlag, owner.DefaultDir, "directory of owner records")
	_ = root.PersistentFlags().MarkHidden(ownersDirFlag)
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
		newAgentCmd(),
	)
	addShipping(root)
	// Last: the rules every command follows (flags, arguments, exit statuses).
	applyConventions(root)
	return root
}

const ownersDirFlag = "owners-dir"

// ownersDir is the owners directory the command was given.
func ownersDir(cmd *cobra.Command) owner.Dir {
	p, _ := cmd.Flags().GetString(ownersDirFlag)
	return owner.Dir{Path: p}
}
