package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"ctrperf/internal/exitcode"
	"ctrperf/internal/plan"
	"ctrperf/internal/report"
	"ctrperf/internal/stats"
)

type compareFlags struct {
	format    string
	output    string
	resamples int
	seed      uint64
	failOn    []string
}

func newCompareCmd() *cobra.Command {
	var f compareFlags
	var format *outputFormat
	cmd := &cobra.Command{
		Use:   "compare OUT1 OUT2",
		Short: "Compare the same configurations across two result sets",
		Long: `Compare two results directories (before and after a change, or two hosts):
for every configuration present in both, each metric's median in OUT1 and
OUT2 and the ratio OUT2/OUT1 with a 95% bootstrap interval (each set
resampled independently) and a verdict. An interval that contains 1 is
"no measurable difference".

--fail-on makes it a CI gate: 'p99_ms>+10%' fails (exit code 3) when the
OUT2/OUT1 ratio of p99_ms is above 1.10 for some configuration — its whole
interval, so noise that merely straddles +10% does not fail the job.
'throughput_per_s<-5%' fails on a drop of more than 5%; 'CONFIG:p99_ms>1.2x'
limits a rule to one configuration. Repeat the flag for several rules.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			f.format = format.String()
			return runCompare(cmd.OutOrStdout(), args[0], args[1], f)
		},
	}
	fl := cmd.Flags()
	format = addFormatFlags(cmd, report.CompareFormats...)
	fl.StringVarP(&f.output, "output", "o", "", "write to this file instead of standard output")
	fl.IntVar(&f.resamples, "resamples", stats.DefaultResamples, "bootstrap resamples per interval")
	fl.Uint64Var(&f.seed, "seed", 1, "bootstrap seed")
	fl.StringArrayVar(&f.failOn, "fail-on", nil, "exit 3 when a ratio's whole interval is beyond this change, e.g. 'p99_ms>+10%' or 'throughput_per_s<-5%' (repeatable)")
	return cmd
}

func runCompare(stdout io.Writer, first, second string, f compareFlags) error {
	if !slices.Contains(report.CompareFormats, f.format) {
		return exitcode.Usagef("unknown --format %q (want one of %s)", f.format, strings.Join(report.CompareFormats, ", "))
	}
	if f.resamples < 100 {
		return exitcode.Usagef("--resamples %d is too few for a 95%% interval (use 1000 or more)", f.resamples)
	}
	var rules []plan.Threshold
	for _, r := range f.failOn {
		t, err := plan.ParseFailOn(r)
		if err != nil {
			return exitcode.Usagef("%v", err)
		}
		rules = append(rules, t)
	}
	c, err := report.CompareDirs(first, second, report.WithStats(stats.Options{Resamples: f.resamples, Seed: f.seed}))
	if err != nil {
		return err
	}
	var gateErr error
	if len(rules) > 0 {
		gateErr = c.CheckFailOn(rules)
	}
	if err := writeRendered(stdout, f.output, f.format, func(w io.Writer) error { return report.RenderComparison(w, c, f.format) }); err != nil {
		return err
	}
	if f.output != "" {
		fmt.Fprintln(stdout, "comparison written to", f.output)
	}
	return thresholdExit(gateErr)
}

// thresholdExit is a broken gate as it leaves the command: a
// *report.ThresholdError carries exit code 3 (exitcode.Of) and names the
// broken rules; other errors pass through.
func thresholdExit(err error) error { return err }
