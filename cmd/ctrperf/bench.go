package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"ctrperf/internal/bench"
	"ctrperf/internal/lifecycle"
	"ctrperf/internal/plan"
)

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Run a benchmark plan: bare metal vs containers, every configuration vs a baseline",
		Long: `ctrperf bench runs the workload of a plan file on bare metal and in Docker
containers across its configurations, repetitions interleaved and shuffled
with the plan's seed, and appends one raw record per run to OUT/results.jsonl.
Reports are recomputed from those records by 'ctrperf report OUT'.

Workloads: web (ticketd + SQLite or MariaDB), kv (memcached), fileio (fio),
bonnie (bonnie++), exec (process start-up, parallel copies), ctxsw (pipe
context switches, stress-ng), oltp (sysbench on MariaDB), cpu (sysbench
cpu), noisy (tenants of which some turn hot). A configuration's isolate: knob runs
the isolate controller during its runs (policy off, paper or strict), so the
same plan measures the controller off and on.

The plan format is described in plans/README.md; ready plans, one per
experiment, are in plans/.`,
	}
	cmd.AddCommand(newBenchRunCmd(defaultEngines), newBenchValidateCmd())
	return cmd
}

// defaultEngines are the real engines of a session: the host, the user's
// Docker engine and private ones (named after the session, which owns them).
func defaultEngines(session string) bench.EngineProvider {
	return &bench.Engines{RunID: session}
}

type benchRunFlags struct {
	out     string
	quick   bool
	resume  string
	quiet   bool
	only    []string
	observe bool
	// allowConcurrent runs beside another live `bench run`.
	allowConcurrent bool
}

// newBenchRunCmd builds `bench run`; engines gives the engine provider of a
// plan (tests give fakes).
func newBenchRunCmd(engines func(session string) bench.EngineProvider) *cobra.Command {
	var f benchRunFlags
	cmd := &cobra.Command{
		Use:   "run [PLAN]",
		Short: "Run a plan into an output directory",
		Long: `Run every run of PLAN and write OUT/results.jsonl, OUT/plan.yaml (the plan as
run), OUT/meta.json and OUT/env.json.

Ctrl-C stops after tearing the current run down; the interrupted run is not
recorded and 'ctrperf bench run --resume OUT' redoes it and finishes the plan
(PLAN may be left out then: OUT/plan.yaml is used). SIGTERM and SIGHUP (the
terminal was closed) stop it the same way, so a closed terminal or a kill
never leaves a run half torn down. A second signal forces the teardown: the
run in progress is removed and private engines are stopped before ctrperf
exits (status 130); further signals do not cut that short. Progress and
messages that can no longer be written (the terminal is gone, a pipe broke)
are dropped, never a reason to stop tearing down.

When OUT cannot be written (disk full, read-only, I/O error) the plan stops
with one error naming the file and the errno, after tearing the run down;
the run whose record was lost is not recorded. Free space and continue with
--resume OUT. A record cut short by a crash is removed by --resume (its bytes
kept in OUT/results.jsonl.partial) and skipped with a warning by 'ctrperf
report'.

A bench run owns what it creates: it keeps an owner record (pid, start
time, host, command, output directory, its run-id prefix <plan>-<session>)
under /run/ctrperf/owners, locked for as long as it lives, so that
'ctrperf clean' in another terminal leaves its containers, networks,
namespaces, cgroups and private engines alone. Two bench runs on one
machine disturb each other's numbers: a second one refuses (exit 1) and
names the first, unless --allow-concurrent, which OUT/env.json records and
the report warns about. 'ctrperf load' and 'ctrperf observe' own nothing
and run beside anything.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runBench(cmd, args, f, engines) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.out, "out", "", "output directory (default out/<plan>-<timestamp>)")
	fl.BoolVar(&f.quick, "quick", false, "apply the plan's quick: section (fewer, shorter runs)")
	fl.StringVar(&f.resume, "resume", "", "continue the plan in this output directory, skipping finished runs")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress output, only warnings and the summary")
	fl.StringSliceVar(&f.only, "only", nil, "run only these configurations (and the baseline)")
	fl.BoolVar(&f.observe, "observe", true, "sample the system (CPU, disks, interrupts, containers) during runs")
	fl.BoolVar(&f.allowConcurrent, "allow-concurrent", false, "run even though another bench run is running on this machine (recorded in env.json, warned in the report)")
	return cmd
}

func runBench(cmd *cobra.Command, args []string, f benchRunFlags, newEngines func(string) bench.EngineProvider) error {
	stdout := cmd.OutOrStdout()
	var p *plan.Plan
	var err error
	out := f.out
	switch {
	case f.resume != "":
		if out != "" && out != f.resume {
			return &exitError{code: 2, msg: "--out and --resume name different directories; --resume continues in its own"}
		}
		out = f.resume
		if len(args) == 0 {
			if f.quick || len(f.only) > 0 {
				return &exitError{code: 2, msg: "--quick and --only shape a new run; the plan in " + f.resume + " already has them applied"}
			}
			p, err = bench.LoadPlan(filepath.Join(f.resume, bench.PlanFile), plan.Options{})
		} else {
			p, err = bench.LoadPlan(args[0], plan.Options{Quick: f.quick, Only: f.only})
		}
	case len(args) == 1:
		p, err = bench.LoadPlan(args[0], plan.Options{Quick: f.quick, Only: f.only})
	default:
		return &exitError{code: 2, msg: "bench run needs a PLAN file (or --resume OUT)"}
	}
	if err != nil {
		return planError(cmd.ErrOrStderr(), err)
	}
	if out == "" {
		out = filepath.Join("out", p.Name+"-"+time.Now().Format("20060102-150405"))
	}

	// SIGINT, SIGTERM and SIGHUP stop the plan; a second one exits after
	// tearing down the run in progress and stopping private engines (the
	// stack runs last pushed first). Private engines are named after the
	// session, which owns them (`ctrperf clean` leaves a live one alone).
	session := bench.NewSession(p)
	engines := newEngines(session)
	force := &lifecycle.Stack{}
	force.Push("stop private engines", engines.Close)
	ctx, stop := lifecycle.SignalContext(cmd.Context(), lifecycle.WithForceCleanup(force, 30*time.Second))
	defer stop()
	owners := ownersDir(cmd)
	fmt.Fprintf(stdout, "writing to %s\n", out)
	opts := bench.Options{
		Out: out, Resume: f.resume != "", Engines: engines, Force: force,
		Progress: progressFor(stdout, cmd.ErrOrStderr(), f.quiet),
		Quick:    f.quick, Only: f.only,
		Session: session, Owners: &owners, AllowConcurrent: f.allowConcurrent,
	}
	if f.observe {
		opts.Observers = bench.SystemObservers()
	}
	_, err = bench.Run(ctx, p, opts)
	if errors.Is(err, bench.ErrConcurrent) {
		return &exitError{code: 1, msg: err.Error()}
	}
	if errors.Is(err, bench.ErrInterrupted) {
		return &exitError{code: 130, msg: err.Error()}
	}
	return err
}

// progressFor draws a bar on a terminal and plain lines elsewhere (logs, CI).
func progressFor(stdout, stderr io.Writer, quiet bool) bench.Progress {
	if !quiet {
		if fd, ok := stdout.(*os.File); ok && term.IsTerminal(int(fd.Fd())) {
			return &bench.Bar{W: stdout}
		}
	}
	return &bench.Lines{W: stdout, Warnw: stderr, Quiet: quiet}
}

func newBenchValidateCmd() *cobra.Command {
	var quick bool
	var only []string
	cmd := &cobra.Command{
		Use:   "validate PLAN",
		Short: "Check a plan without running it; print its configurations and run order",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := bench.LoadPlan(args[0], plan.Options{Quick: quick, Only: only})
			if err != nil {
				return planError(cmd.ErrOrStderr(), err)
			}
			return p.Describe(cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&quick, "quick", false, "validate the plan's quick variant")
	cmd.Flags().StringSliceVar(&only, "only", nil, "keep only these configurations (and the baseline)")
	return cmd
}

// planError prints every problem of a plan, one per line, and fails.
func planError(stderr io.Writer, err error) error {
	var es plan.Errors
	if errors.As(err, &es) {
		for _, e := range es {
			fmt.Fprintln(stderr, e)
		}
		n := "problem"
		if len(es) > 1 {
			n = "problems"
		}
		return &exitError{code: 1, msg: fmt.Sprintf("the plan has %d %s; nothing was run", len(es), n)}
	}
	return err
}
