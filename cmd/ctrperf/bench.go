package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"ctrperf/internal/bench"
	"ctrperf/internal/doctor"
	"ctrperf/internal/exitcode"
	"ctrperf/internal/lifecycle"
	"ctrperf/internal/plan"
	"ctrperf/internal/report"
	"ctrperf/internal/results"
	"ctrperf/internal/runtimes"
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
context switches, stress-ng), oltp (sysbench on MariaDB), cpu (sysbench cpu),
noisy (tenants of which some turn hot), and app: your own service, from an
image on the engine or a Dockerfile context built locally (never pulled),
with a host command as the bare-metal baseline, driven by an HTTP scenario
or the memcached protocol (examples/hello/plan.yaml) or by your own load
tool (load.command: redis-benchmark, pgbench, memtier_benchmark, wrk, k6)
run where the load stands, {{host:app}} and {{port:app:PORT}} resolved from
there, its figures read by a ready-made parser (load.parser) or your
patterns (examples/redis/plan.yaml, examples/postgres/plan.yaml), and command (your own
command, e.g. pgbench or a build, in a container of any local image and on
the host: warm-ups, N timed executions, wall-time median/mean/σ/min/max and a
figure parsed from its output). A configuration's isolate: knob runs
the isolate controller during its runs (policy off, paper or strict), so the
same plan measures the controller off and on.

A load of web or kv with search: {slo: {p99_ms: 50, error_rate: 0.01},
from: 50, to: 5000} makes every run search for its capacity, the highest
open-loop rate that meets the SLO (bracket, then bisect; one window per
step): 'bench run' prints each step and the search's cost, the report shows
capacity_per_s per configuration with its interval and ratio, or "below the
lowest rate tried" when none met it.

The plan format is described in plans/README.md; ready plans, one per
experiment, are in plans/ and built into ctrperf. PLAN is a bare name for a
built-in plan ('ctrperf plans list'; 'ctrperf bench run smoke' works from
any directory and never reads a file called smoke), or a path for a plan
file: anything with a slash or a .yaml/.yml suffix (./smoke, mine.yaml,
plans/smoke.yaml; a missing smoke.yaml or plans/smoke.yaml is the built-in
plan).`,
	}
	cmd.AddCommand(newBenchRunCmd(defaultEngines), newBenchValidateCmd())
	return cmd
}

// defaultEngines are the real engines of a session: the host, the user's
// Docker engine and private ones (named after the session, which owns them);
// runtime vm gets doctor's reason why no VM runs here.
func defaultEngines(session string) bench.EngineProvider {
	return &bench.Engines{RunID: session, VM: func(ctx context.Context) string { return doctor.VM(ctx).Reason }}
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
	// kubeconfig is runtime kubernetes' kubeconfig when a plan names none.
	kubeconfig string
	hosts      hostFlags
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
and run beside anything.

With hosts: in the plan (or --hosts sut=DEST,load=DEST) the system under
test (its engine, the bare-metal baseline, the samplers) runs on the sut
host and the load generator on the load host, each reached over SSH as ssh
would reach it (the plan's ssh_config:, --ssh-config, else ~/.ssh/config):
ctrperf copies itself there once and runs 'ctrperf agent'; latencies are
timed on the load host alone, each host's clock offset is recorded, and
every record names both hosts. A host whose key is not in known_hosts is
refused unless --accept-new-host-key; a changed key always is. A
DOCKER_HOST that names another machine (tcp://, ssh://) is refused before
anything is deployed: name that machine in hosts: instead.

The exit status is 1 when the plan finished but measured nothing to
compare: no run succeeded, or none of the baseline's did (say, every run
failed because an image is not built yet); the last line says which. It is
3 when a threshold of the plan is broken, 130 after an interruption.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runBench(cmd, args, f, engines) },
	}
	fl := cmd.Flags()
	f.hosts.add(fl, true)
	fl.StringVar(&f.out, "out", "", "output directory (default out/<plan>-<timestamp>)")
	fl.BoolVar(&f.quick, "quick", false, "apply the plan's quick: section (fewer, shorter runs)")
	fl.StringVar(&f.resume, "resume", "", "continue the plan in this output directory, skipping finished runs")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress output, only warnings and the summary")
	fl.StringSliceVar(&f.only, "only", nil, "run only these configurations (and the baseline)")
	fl.BoolVar(&f.observe, "observe", true, "sample the system (CPU, disks, interrupts, containers) during runs")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of runtime kubernetes when the plan's kubernetes.kubeconfig names none (default $KUBECONFIG, then ~/.kube/config)")
	fl.BoolVar(&f.allowConcurrent, "allow-concurrent", false, "run even though another bench run is running on this machine (recorded in env.json, warned in the report)")
	return cmd
}

func runBench(cmd *cobra.Command, args []string, f benchRunFlags, newEngines func(string) bench.EngineProvider) error {
	stdout := cmd.OutOrStdout()
	var p *plan.Plan
	popt, err := f.hosts.apply(plan.Options{Quick: f.quick, Only: f.only})
	if err != nil {
		return err
	}
	out := f.out
	switch {
	case f.resume != "":
		if out != "" && out != f.resume {
			return exitcode.AsUsage(errors.New("--out and --resume name different directories; --resume continues in its own"))
		}
		out = f.resume
		if len(args) == 0 {
			if f.quick || len(f.only) > 0 {
				return exitcode.AsUsage(errors.New("--quick and --only shape a new run; the plan in " + f.resume + " already has them applied"))
			}
			if f.hosts.hosts != "" || f.hosts.sshConfig != "" {
				return exitcode.AsUsage(errors.New("--hosts and --ssh-config shape a new run; the plan in " + f.resume + " already names its hosts"))
			}
			p, err = bench.LoadOutPlan(f.resume, plan.Options{})
		} else {
			p, err = openPlan(cmd, args[0], popt)
		}
	case len(args) == 1:
		p, err = openPlan(cmd, args[0], popt)
	default:
		return exitcode.AsUsage(errors.New("bench run needs a PLAN file or built-in plan name (or --resume OUT)"))
	}
	if err != nil {
		return planError(cmd.ErrOrStderr(), err)
	}
	// Before anything is deployed: a remote DOCKER_HOST would deploy
	// there and sample here.
	if err := checkDockerHost(os.Getenv, p); err != nil {
		return err
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
	if e, ok := engines.(*bench.Engines); ok {
		e.RuntimeFlags = map[string]string{runtimes.KubeconfigFlag: f.kubeconfig}
	}
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
		AcceptNewHostKey: f.hosts.acceptNew,
	}
	if f.observe {
		opts.Observers = bench.SystemObservers()
	}
	_, err = bench.Run(ctx, p, opts)
	if errors.Is(err, bench.ErrConcurrent) {
		return err
	}
	if errors.Is(err, bench.ErrInterrupted) {
		return &exitcode.Error{Code: exitcode.Interrupted, Err: err}
	}
	if err == nil {
		// Everything in OUT, a resumed plan's earlier runs included; a
		// record cut short was set aside by the run, the rest stands.
		recs, rerr := results.ReadDir(out)
		if rerr != nil && !errors.Is(rerr, results.ErrTruncated) {
			return rerr
		}
		if err := bench.CheckMeasured(recs, p.Baseline); err != nil {
			return err
		}
	}
	if err == nil && len(p.Thresholds) > 0 {
		// The gates, on everything in OUT (a resumed plan included); the
		// summary above has already shown them.
		rep, lerr := report.Load(out)
		if lerr != nil {
			return lerr
		}
		return thresholdExit(rep.Gate())
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
	var hosts hostFlags
	var format *outputFormat
	cmd := &cobra.Command{
		Use:   "validate PLAN",
		Short: "Check a plan without running it; print its configurations and run order",
		Long: `Check a plan without running it: every problem is printed with its file and
line, and the exit status is 1. A valid plan is printed expanded: its
configurations with all their knobs (the matrix multiplied out, plan-level
app and load maps merged in) and the run order. --format json prints the
same as one document (configurations with their knobs as records store
them, runs in order). A plan with hosts: shows how ssh resolves each host
and, for each configuration whose load host is not its SUT, the path the
load host takes (the SUT's address, Docker's DNAT of a published port, or a
route to the container): never a relay of ctrperf's.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opt, err := hosts.apply(plan.Options{Quick: quick, Only: only})
			if err != nil {
				return err
			}
			p, err := openPlan(cmd, args[0], opt)
			if err != nil {
				return planError(cmd.ErrOrStderr(), err)
			}
			if format.JSON() {
				v := planJSON(p)
				v.SSHConfig = p.SSHConfig
				v.Hosts = describeHosts(cmd.Context(), nil, p)
				return writeJSON(cmd.OutOrStdout(), v)
			}
			if err := p.Describe(cmd.OutOrStdout()); err != nil {
				return err
			}
			describeHosts(cmd.Context(), cmd.OutOrStdout(), p)
			return nil
		},
	}
	format = addFormatFlags(cmd, formatTable, formatJSON)
	cmd.Flags().BoolVar(&quick, "quick", false, "validate the plan's quick variant")
	cmd.Flags().StringSliceVar(&only, "only", nil, "keep only these configurations (and the baseline)")
	hosts.add(cmd.Flags(), false)
	return cmd
}

// validatedPlan is `bench validate --format json`.
type validatedPlan struct {
	Name           string            `json:"name"`
	File           string            `json:"file"`
	Description    string            `json:"description,omitempty"`
	Workload       string            `json:"workload"`
	Quick          bool              `json:"quick"`
	Repetitions    int               `json:"repetitions"`
	WarmupS        float64           `json:"warmup_s"`
	DurationS      float64           `json:"duration_s"`
	Seed           int64             `json:"seed"`
	Baseline       string            `json:"baseline"`
	LoadCPUSet     string            `json:"load_cpuset,omitempty"`
	Configurations []validatedConfig `json:"configurations"`
	Runs           []validatedRun    `json:"runs"`
	// MeasuringS is the least time the plan takes: warm-up and measured
	// window of every run, without deploys and teardowns.
	MeasuringS float64 `json:"min_measuring_s"`
	// Hosts are the plan's other hosts and what ssh resolves each to
	// (hosts:, --hosts), with the ssh config they are read with.
	SSHConfig string          `json:"ssh_config,omitempty"`
	Hosts     []validatedHost `json:"hosts,omitempty"`
}

// validatedRun is one run of the order; repetition counts from 1, as
// progress and reports print it.
type validatedRun struct {
	Index      int    `json:"index"`
	Repetition int    `json:"repetition"`
	Config     string `json:"config"`
}

type validatedConfig struct {
	Name     string         `json:"name"`
	Baseline bool           `json:"baseline,omitempty"`
	Origin   string         `json:"origin,omitempty"`
	Knobs    map[string]any `json:"knobs"`
}

func planJSON(p *plan.Plan) validatedPlan {
	v := validatedPlan{Name: p.Name, File: p.File, Description: p.Description, Workload: p.Workload, Quick: p.Quicked,
		Repetitions: p.Repetitions, WarmupS: p.Warmup.Seconds(), DurationS: p.Duration.Seconds(), Seed: p.Seed,
		Baseline: p.Baseline, LoadCPUSet: p.LoadCPUSet}
	for _, r := range p.Runs() {
		v.Runs = append(v.Runs, validatedRun{Index: r.Index + 1, Repetition: r.Repetition + 1, Config: r.Config})
	}
	for i := range p.Configurations {
		c := &p.Configurations[i]
		v.Configurations = append(v.Configurations, validatedConfig{Name: c.Name, Baseline: c.Name == p.Baseline, Origin: c.Origin, Knobs: c.KnobMap()})
	}
	v.MeasuringS = float64(len(v.Runs)) * (p.Warmup + p.Duration).Seconds()
	return v
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
		return fmt.Errorf("the plan has %d %s; nothing was run", len(es), n)
	}
	return err
}
