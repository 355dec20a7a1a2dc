package main

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"ctrperf/internal/exitcode"
	"ctrperf/internal/fsutil"
	"ctrperf/internal/report"
	"ctrperf/internal/stats"
)

type reportFlags struct {
	format    string
	baseline  string
	output    string
	resamples int
	seed      uint64
}

func newReportCmd() *cobra.Command {
	var f reportFlags
	var format *outputFormat
	cmd := &cobra.Command{
		Use:   "report OUT",
		Short: "Recompute reports from a results directory",
		Long: `Recompute statistics and a report from OUT/results.jsonl: per configuration
and operation the aggregate (samples, mean, median, p90, p99, min, max,
error %, throughput, KB/s), every configuration against the baseline with a
95% bootstrap interval and a verdict, the observers' mean/max figures and
warnings with advice.

Formats: table (terminal), md, json, csv (one row per config x operation x
metric), html (one self-contained file with plots; written to
OUT/report.html unless -o is given). The first lines answer in words: per
configuration, the differences from the baseline whose interval excludes 1.

When the plan has thresholds: (see plans/README.md), they are checked and
the command exits 3 when one is broken, naming it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f.format = format.String()
			return runReport(cmd.OutOrStdout(), args[0], f)
		},
	}
	fl := cmd.Flags()
	format = addFormatFlags(cmd, report.Formats...)
	fl.StringVar(&f.baseline, "baseline", "", "configuration to compare with (default: the plan's baseline)")
	fl.StringVarP(&f.output, "output", "o", "", "write to this file instead of standard output")
	fl.IntVar(&f.resamples, "resamples", stats.DefaultResamples, "bootstrap resamples per interval")
	fl.Uint64Var(&f.seed, "seed", 1, "bootstrap seed (the same seed gives the same intervals)")
	return cmd
}

func runReport(stdout io.Writer, dir string, f reportFlags) error {
	if !slices.Contains(report.Formats, f.format) {
		return exitcode.Usagef("unknown --format %q (want one of %s)", f.format, strings.Join(report.Formats, ", "))
	}
	if f.resamples < 100 {
		return exitcode.Usagef("--resamples %d is too few for a 95%% interval (use 1000 or more)", f.resamples)
	}
	opts := []report.Option{report.WithStats(stats.Options{Resamples: f.resamples, Seed: f.seed})}
	if f.baseline != "" {
		opts = append(opts, report.WithBaseline(f.baseline))
	}
	rep, err := report.Load(dir, opts...)
	if err != nil {
		return err
	}
	out := f.output
	if out == "" && f.format == "html" {
		out = filepath.Join(dir, "report.html")
	}
	if err := writeRendered(stdout, out, f.format, func(w io.Writer) error { return report.Render(w, rep, f.format) }); err != nil {
		return err
	}
	if out != "" {
		fmt.Fprintln(stdout, "report written to", out)
	}
	return thresholdExit(rep.Gate())
}

// writeRendered renders into memory first, so that a failed render never
// leaves half a file, then writes to path (atomically, via a temporary file
// in the same directory) or to stdout when path is empty. JSON gets
// schema_version and ctrperf_version like every JSON output.
func writeRendered(stdout io.Writer, path, format string, render func(io.Writer) error) error {
	var buf bytes.Buffer
	if err := render(&buf); err != nil {
		return err
	}
	if format == formatJSON {
		var j bytes.Buffer
		if err := writeJSONBytes(&j, buf.Bytes()); err != nil {
			return err
		}
		buf = j
	}
	if path == "" {
		_, err := stdout.Write(buf.Bytes())
		return err
	}
	// Reading OUT through links is harmless; writing is not: root writes
	// only into a directory nobody else can redirect, and replaces a link
	// at path rather than following it.
	if err := fsutil.CheckDirFollow(filepath.Dir(path)); err != nil {
		return fmt.Errorf("write %s: %w; give -o a file in a directory only root or you can change", path, err)
	}
	return fsutil.WriteFileAtomic(path, buf.Bytes(), 0o644)
}
